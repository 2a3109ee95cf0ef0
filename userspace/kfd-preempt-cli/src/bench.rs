#[derive(clap::Args, Debug)]
pub(crate) struct BenchArgs {}
pub(crate) fn run(_: &BenchArgs) -> crate::CliResult { Ok(crate::Done::Ok) }
