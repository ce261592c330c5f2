//! The event queue: a map keyed by `(virtual time, insertion counter)`, so events at the same
//! instant run in the order they were scheduled and the order is total and deterministic.

use byzfs_bft::Time;
use std::collections::BTreeMap;

/// A deterministic priority queue of timed events.
#[derive(Debug)]
pub struct EventQueue<E> {
    events: BTreeMap<(Time, u64), E>,
    counter: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            events: BTreeMap::new(),
            counter: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `event` at `at`.
    pub fn push(&mut self, at: Time, event: E) {
        self.counter += 1;
        self.events.insert((at, self.counter), event);
    }

    /// Removes and returns the earliest event (ties: first scheduled first).
    pub fn pop(&mut self) -> Option<(Time, E)> {
        self.events.pop_first().map(|((t, _), e)| (t, e))
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<Time> {
        self.events.first_key_value().map(|((t, _), _)| *t)
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_time_then_insertion() {
        let mut q = EventQueue::new();
        q.push(Time(5), "c");
        q.push(Time(1), "a");
        q.push(Time(5), "d");
        q.push(Time(1), "b");
        q.push(Time(0), "first");
        assert_eq!(q.len(), 5);
        assert_eq!(q.peek_time(), Some(Time(0)));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (Time(0), "first"),
                (Time(1), "a"),
                (Time(1), "b"),
                (Time(5), "c"),
                (Time(5), "d")
            ]
        );
        assert!(q.is_empty());
    }
}
