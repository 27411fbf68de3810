//! (placeholder: being written)

#[derive(clap::Args)]
pub struct SimArgs {}

pub fn run(_args: SimArgs) -> Result<(), String> {
    Err("not built yet".to_owned())
}
