pub(crate) fn from_file(_: &std::path::Path, _: &std::path::Path) -> crate::CliResult { Ok(crate::Done::Ok) }
