//! What the runtime's integration tests share: a block made of two
//! closures, placed on a role.

use kernel::runtime::BlockPlacement;
use kernel::thread_config::ThreadRole;
use kernel::{Block, Context};
use signal::{BlockRef, Signal};

type StartFn = Box<dyn FnMut(&mut Context<'_>) + Send>;
type ExecuteFn = Box<dyn FnMut(Signal, &mut Context<'_>) + Send>;

/// A block made of two closures.
struct TestBlock {
    on_start: StartFn,
    on_execute: ExecuteFn,
}

impl Block for TestBlock {
    fn start(&mut self, ctx: &mut Context<'_>) {
        (self.on_start)(ctx);
    }
    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>) {
        (self.on_execute)(signal, ctx);
    }
}

/// A [`TestBlock`] at `address`, on a thread of `role`.
pub fn place(
    address: BlockRef,
    role: ThreadRole,
    on_start: impl FnMut(&mut Context<'_>) + Send + 'static,
    on_execute: impl FnMut(Signal, &mut Context<'_>) + Send + 'static,
) -> BlockPlacement {
    BlockPlacement {
        address,
        role,
        block: Box::new(TestBlock {
            on_start: Box::new(on_start),
            on_execute: Box::new(on_execute),
        }),
    }
}
