//! (placeholder: being written)

#[derive(clap::Args)]
pub struct DataArgs {}

pub fn run(_args: DataArgs) -> Result<(), String> {
    Err("not built yet".to_owned())
}
