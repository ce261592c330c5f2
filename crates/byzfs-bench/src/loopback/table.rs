//! Tables on stdout: the micro-benchmark in PBFT OSDI'99 Table 1's layout (rows 0/0, 0/4,
//! 4/0; read-write and read-only latency with overhead relative to the unreplicated
//! service), and the throughput points in the BFT library's terms, with the targets.

use super::json::Row;

fn switches(r: &Row) -> String {
    match (r.batching, r.srt, r.tentative, r.read_only_opt) {
        (Some(b), Some(s), Some(t), Some(ro)) => super::Switches {
            batching: b,
            srt: s,
            tentative: t,
            read_only: ro,
            disk: r.durability.as_deref() == Some("disk"),
        }
        .label(),
        _ => String::new(),
    }
}

fn find<'a>(rows: &'a [Row], op: &str, mode: &str, system: &str, sw: &str) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.op == op
            && r.mode == mode
            && r.system == system
            && (system != "byzfs" || switches(r) == sw)
    })
}

fn ms(r: Option<&Row>) -> String {
    r.map_or("-".into(), |r| format!("{:.3}", r.latency_us_p50 / 1000.0))
}

fn overhead(a: Option<&Row>, b: Option<&Row>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b.latency_us_p50 > 0.0 => {
            format!(
                "{:+.0}%",
                (a.latency_us_p50 / b.latency_us_p50 - 1.0) * 100.0
            )
        }
        _ => "-".into(),
    }
}

fn cpu(r: Option<&Row>) -> String {
    r.map_or("-".into(), |r| match r.server_frames_per_op {
        Some(f) => format!("{:.1} ({f:.1})", r.server_cpu_us_per_op),
        None => format!("{:.1}", r.server_cpu_us_per_op),
    })
}

fn ratio(a: Option<&Row>, b: Option<&Row>, f: fn(&Row) -> f64) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if f(b) > 0.0 => Some(f(a) / f(b)),
        _ => None,
    }
}

fn verdict(x: Option<f64>, max: f64) -> String {
    match x {
        Some(x) if x <= max => format!("{x:.2}× (target ≤ {max}×: met)"),
        Some(x) => format!("{x:.2}× (target ≤ {max}×: NOT met)"),
        None => "not measured".into(),
    }
}

/// Micro-benchmark tables, one per ByzFS configuration.
pub fn micro(rows: &[Row]) {
    let mut ops: Vec<&str> = Vec::new();
    for r in rows {
        if !ops.contains(&r.op.as_str()) {
            ops.push(&r.op);
        }
    }
    let mut configs: Vec<String> = Vec::new();
    for r in rows.iter().filter(|r| r.system == "byzfs") {
        let s = switches(r);
        if !configs.contains(&s) {
            configs.push(s);
        }
    }
    if configs.is_empty() {
        configs.push(String::new());
    }
    for sw in &configs {
        println!();
        println!(
            "Table 1: null-operation latency (ms, median p50); overhead relative to unreplicated / unreplicated with MACs"
        );
        if !sw.is_empty() {
            println!("ByzFS n = 4, {sw}");
        }
        println!(
            "{:<6} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>9} {:>9}",
            "op", "r/w", "vs plain", "vs MAC", "r/o", "vs plain", "vs MAC", "unrep", "unrep+MAC"
        );
        for op in &ops {
            let g = |mode, sys| find(rows, op, mode, sys, sw);
            let (rw, ro) = (g("rw", "byzfs"), g("ro", "byzfs"));
            let (u_rw, u_ro) = (g("rw", "unreplicated"), g("ro", "unreplicated"));
            let (m_rw, m_ro) = (g("rw", "unreplicated-mac"), g("ro", "unreplicated-mac"));
            println!(
                "{:<6} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>9} {:>9}",
                op,
                ms(rw),
                overhead(rw, u_rw),
                overhead(rw, m_rw),
                ms(ro),
                overhead(ro, u_ro),
                overhead(ro, m_ro),
                ms(u_rw.or(u_ro)),
                ms(m_rw.or(m_ro)),
            );
        }
        println!();
        println!(
            "server CPU time per operation, µs (frames sent by the servers per operation); ByzFS: sum over its 4 replicas"
        );
        println!(
            "{:<6} | {:>14} {:>14} | {:>14} {:>14} | {:>14} {:>14}",
            "op", "ByzFS r/w", "ByzFS r/o", "unrep r/w", "unrep r/o", "MAC r/w", "MAC r/o"
        );
        for op in &ops {
            let g = |mode, sys| find(rows, op, mode, sys, sw);
            println!(
                "{:<6} | {:>14} {:>14} | {:>14} {:>14} | {:>14} {:>14}",
                op,
                cpu(g("rw", "byzfs")),
                cpu(g("ro", "byzfs")),
                cpu(g("rw", "unreplicated")),
                cpu(g("ro", "unreplicated")),
                cpu(g("rw", "unreplicated-mac")),
                cpu(g("ro", "unreplicated-mac")),
            );
        }
        let lat = |r: &Row| r.latency_us_p50;
        let g = |mode, sys| find(rows, "0/0", mode, sys, sw);
        println!();
        println!(
            "target: read-only 0/0 latency vs unreplicated with MACs: {}",
            verdict(
                ratio(g("ro", "byzfs"), g("ro", "unreplicated-mac"), lat),
                1.5
            )
        );
        println!(
            "target: read-write 0/0 latency vs unreplicated with MACs: {}",
            verdict(
                ratio(g("rw", "byzfs"), g("rw", "unreplicated-mac"), lat),
                3.0
            )
        );
    }
}

/// Throughput points, one line each, then the CPU target at 50 clients.
pub fn throughput(rows: &[Row], n: usize) {
    println!();
    println!("Throughput and latency vs clients (BFT library Figures 6-7)");
    println!(
        "{:<16} {:<44} {:<5} {:<3} {:>7} | {:>10} {:>9} {:>9} | {:>11} {:>11} {:>6} {:>7}",
        "system",
        "switches",
        "op",
        "mode",
        "clients",
        "ops/s",
        "p50 ms",
        "p99 ms",
        "srv CPU µs",
        "cli CPU µs",
        "batch",
        "msgs/op"
    );
    for r in rows {
        println!(
            "{:<16} {:<44} {:<5} {:<3} {:>7} | {:>10.0} {:>9.3} {:>9.3} | {:>11.1} {:>11.1} {:>6} {:>7}",
            r.system,
            switches(r),
            r.op,
            r.mode,
            r.clients,
            r.throughput_ops_s,
            r.latency_us_p50 / 1000.0,
            r.latency_us_p99 / 1000.0,
            r.server_cpu_us_per_op,
            r.client_cpu_us_per_op,
            r.batch_size_mean.map_or("-".into(), |b| format!("{b:.1}")),
            r.server_frames_per_op
                .map_or("-".into(), |f| format!("{f:.1}"))
        );
        if let Some(k) = r.killed_primary_at_s {
            let s =
                |x: Option<f64>| x.map_or("never (within the run)".into(), |x| format!("{x:.2} s"));
            println!(
                "    primary SIGKILLed at {k:.1} s: new view installed after {}, throughput back to 80% of {:.0} ops/s after {}, longest operation (a client's stall) {}",
                s(r.new_view_after_s),
                r.throughput_before_kill_ops_s.unwrap_or(0.0),
                s(r.recovered_after_s),
                s(r.longest_op_s)
            );
        }
    }
    // CPU target: at 50 clients with batching, replicas' CPU per op ≤ 1.5 × n × the
    // unreplicated (with MACs) server's.
    for r in rows.iter().filter(|r| {
        r.system == "byzfs"
            && r.clients == 50
            && r.batching == Some(true)
            && r.killed_primary_at_s.is_none()
    }) {
        let base = rows.iter().find(|u| {
            u.system == "unreplicated-mac" && u.clients == 50 && u.op == r.op && u.mode == r.mode
        });
        let x = base
            .filter(|b| b.server_cpu_us_per_op > 0.0)
            .map(|b| r.server_cpu_us_per_op / (n as f64 * b.server_cpu_us_per_op));
        println!(
            "target: {} {} at 50 clients ({}): replica CPU per op / (n × unreplicated-with-MACs) = {}",
            r.op,
            r.mode,
            switches(r),
            verdict(x, 1.5)
        );
    }
}
