//! Checks one configuration of the fast path's view change and prints what it found:
//! `cargo run --release -p byzfs-model --example explore -- RULE LIAR VIEWS SLOTS`, RULE one
//! of `walk`, `zyzzyva`, `walk-past-certificates`, SLOTS 0 for "any number" (one slot whose
//! undecided case is the adversary's). Larger than CI's: `walk 0 2 2` (27 M states, 4 GB).

use byzfs_model::fast_view_change::FastViewChange;
use byzfs_model::rule::Rule;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: explore walk|zyzzyva|walk-past-certificates LIAR(0-3) VIEWS(1-3) SLOTS(0-2)";
    let [rule, liar, views, slots] = args.as_slice() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let rule = match rule.as_str() {
        "walk" => Rule::Walk,
        "zyzzyva" => Rule::Zyzzyva,
        "walk-past-certificates" => Rule::WalkPastCertificates,
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let (Ok(liar), Ok(views), Ok(slots)) = (
        liar.parse::<usize>(),
        views.parse::<u8>(),
        slots.parse::<usize>(),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    if liar > 3 || !(1..=3).contains(&views) || slots > 2 {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let began = std::time::Instant::now();
    let model = if slots == 0 {
        FastViewChange::any_slots(rule, liar, views)
    } else {
        FastViewChange::new(rule, liar, views, slots)
    };
    let check = model.check();
    println!(
        "{rule:?}, liar {liar}, {views} views, {} slots: {} states in {:.1} s; a completion after a view change reached: {}",
        if slots == 0 { "any".to_string() } else { slots.to_string() },
        check.states,
        began.elapsed().as_secs_f64(),
        check.completed_after_a_view_change
    );
    for (property, steps) in &check.violations {
        println!(
            "violated: {property}, in {} steps:\n  {}",
            steps.len(),
            steps.join("\n  ")
        );
    }
}
