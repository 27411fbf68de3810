//! (placeholder: being written)

#[derive(clap::Args)]
pub struct MgmdArgs {}

pub fn run(_args: MgmdArgs) -> Result<(), String> {
    Err("not built yet".to_owned())
}
