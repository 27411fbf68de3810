//! Where a local signal goes: (block number, instance) → the execution
//! thread that runs the block and its slot in that thread's block list.
//! Built once at `Runtime::new` and shared read-only by every thread and
//! injector, so routing a signal is two indexings and no lock.

use signal::{BlockNumber, BlockRef};

use super::shared::Shared;

/// A placed block: `thread` is the execution thread index, `slot` the index
/// in that thread's block list.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    pub(crate) thread: usize,
    pub(crate) slot: usize,
}

/// Block numbers are a `u8`, so one row per possible number.
const BLOCK_NUMBERS: usize = 256;

pub(crate) struct RouteTable {
    /// `rows[block number][instance]`.
    rows: Vec<Vec<Option<Route>>>,
}

impl RouteTable {
    pub(crate) fn new() -> RouteTable {
        RouteTable {
            rows: vec![Vec::new(); BLOCK_NUMBERS],
        }
    }

    /// Returns false (and changes nothing) when the address is taken.
    pub(crate) fn insert(&mut self, block: BlockNumber, instance: u16, route: Route) -> bool {
        let row = &mut self.rows[usize::from(block.0)];
        let instance = usize::from(instance);
        if row.len() <= instance {
            row.resize(instance + 1, None);
        }
        if row[instance].is_some() {
            return false;
        }
        row[instance] = Some(route);
        true
    }

    /// The route of a block of this node; the caller has checked the node.
    pub(crate) fn get(&self, address: BlockRef) -> Option<Route> {
        self.rows[usize::from(address.block.0)]
            .get(usize::from(address.instance))
            .copied()
            .flatten()
    }
}

/// At most one warning about dropped signals per thread per this interval.
const DROP_WARNING_INTERVAL_MS: u64 = 1000;

/// Counts signals that could not be routed and warns about them, rate-limited
/// so a block that keeps sending to a wrong address cannot flood the log.
pub(crate) struct DropLog {
    last_warning: Option<std::time::Instant>,
    dropped_since_warning: u64,
}

impl DropLog {
    pub(crate) fn new() -> DropLog {
        DropLog {
            last_warning: None,
            dropped_since_warning: 0,
        }
    }

    /// `what` says what was dropped (`signal Heartbeat`, `timer 7`), `thread` who dropped it.
    pub(crate) fn note(
        &mut self,
        shared: &Shared,
        thread: &str,
        what: &str,
        sender: BlockRef,
        receiver: BlockRef,
    ) {
        shared.count_dropped();
        self.dropped_since_warning += 1;
        let now = std::time::Instant::now();
        let interval = std::time::Duration::from_millis(DROP_WARNING_INTERVAL_MS);
        if self
            .last_warning
            .is_none_or(|last| now.duration_since(last) >= interval)
        {
            tracing::warn!(
                thread,
                what,
                %sender,
                %receiver,
                dropped = self.dropped_since_warning,
                "no block of this node has the receiver's address; dropped (count is since the last warning)"
            );
            self.last_warning = Some(now);
            self.dropped_since_warning = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::NodeId;

    #[test]
    fn routes_found_and_duplicates_refused() {
        let node = NodeId::new(1).expect("1 is a node id");
        let mut table = RouteTable::new();
        let route = Route { thread: 2, slot: 1 };
        assert!(table.insert(BlockNumber(5), 3, route));
        assert!(!table.insert(BlockNumber(5), 3, Route { thread: 0, slot: 0 }));
        assert_eq!(
            table.get(BlockRef::new(node, BlockNumber(5), 3)),
            Some(route)
        );
        assert_eq!(table.get(BlockRef::new(node, BlockNumber(5), 2)), None);
        assert_eq!(table.get(BlockRef::new(node, BlockNumber(5), 4)), None);
        assert_eq!(table.get(BlockRef::new(node, BlockNumber(6), 3)), None);
    }
}
