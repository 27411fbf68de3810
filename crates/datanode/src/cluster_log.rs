//! One way for a block to report an event: to this node's log and, with a
//! management server, to its cluster log (NDB's event reports), where an
//! operator looks first.

use kernel::Context;
use signal::{BlockNumber, BlockRef, EventKind, NodeId, Severity, SignalBody};

/// Logs `text` on `node` at `severity` and sends it to `mgmd`'s cluster
/// log (`MgmEventRep`, with `kind`'s category and level) when there is one; the
/// mgmd's `CLUSTERLOG` filter decides whether it is written there.
pub(crate) fn report(
    ctx: &mut Context<'_>,
    node: NodeId,
    mgmd: Option<NodeId>,
    kind: EventKind,
    severity: Severity,
    text: String,
) {
    match severity {
        Severity::Info => tracing::info!(node = %node, "{text}"),
        Severity::Warning => tracing::warn!(node = %node, "{text}"),
        Severity::Alert => tracing::error!(node = %node, "{text}"),
    }
    if let Some(mgmd) = mgmd {
        ctx.send(
            BlockRef::new(mgmd, BlockNumber::MANAGEMENT, 0),
            SignalBody::MgmEventRep {
                severity,
                category: kind.category(),
                level: kind.level(),
                text,
            },
        );
    }
}
