//! `kfd-preempt`: the command-line front end of the kfd_preempt module.
//!
//! Only `info` exists so far; the queue commands follow the module's.

use std::process::ExitCode;

use kfd_preempt::{Device, Error};

const USAGE: &str = "usage: kfd-preempt info";

fn info() -> Result<(), Error> {
    let info = Device::open()?.info()?;
    println!("abi:        {}.{}", info.abi_major, info.abi_minor);
    let caps = info.caps.names();
    if caps.is_empty() {
        println!("caps:       (none)");
    } else {
        println!("caps:       {}", caps.join(" "));
    }
    println!("max batch:  {}", info.max_batch);
    println!(
        "structs:    queue_ref {} bytes, queue_info {} bytes",
        info.sizeof_queue_ref, info.sizeof_queue_info
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["info"] => info(),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kfd-preempt: {e}");
            ExitCode::FAILURE
        }
    }
}
