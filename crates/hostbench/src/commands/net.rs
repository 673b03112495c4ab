//! `hostbench net server|client|loopback`.

use hostbench_core::Runner;

use crate::cli::{NetArgs, NetMode};
use crate::settings;
use crate::Exit;

pub fn run(args: &NetArgs) -> anyhow::Result<Exit> {
    let (test, cfg) = match &args.mode {
        NetMode::Server(a) => {
            hostbench_net::serve(settings::net_server(a)?, a.ready_file.as_deref())?;
            return Ok(Exit::Ok);
        }
        NetMode::Client(a) => {
            let common = settings::common(&a.test.common)?;
            let cfg = settings::net_client(a, &common)?;
            (common, cfg)
        }
        NetMode::Loopback(a) => {
            let common = settings::common(&a.test.common)?;
            let cfg = settings::net_loopback(a, &common)?;
            (common, cfg)
        }
    };
    let host = super::host_inventory(&test.spec);
    let mut runner = Runner::new(test.runner.clone(), host.clone());
    hostbench_net::run_net(&mut runner, &cfg, &host, &test.spec)?;
    let result = runner.finish()?;
    super::emit(&result, &test)
}
