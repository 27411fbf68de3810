//! (placeholder: being written)

#[derive(clap::Args)]
pub struct SandboxArgs {}

pub fn run(_args: SandboxArgs) -> Result<(), String> {
    Err("not built yet".to_owned())
}
