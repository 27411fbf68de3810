//! (placeholder: being written)

#[derive(clap::Args)]
pub struct AdminArgs {}

pub fn run(_args: AdminArgs) -> Result<(), String> {
    Err("not built yet".to_owned())
}
