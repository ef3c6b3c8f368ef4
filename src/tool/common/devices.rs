//! `rdmaperf devices`: what RDMA devices, ports and GIDs this host has.

use crate::verbs::{devices, Context};

pub fn list() -> i32 {
    let devs = match devices() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("rdmaperf devices: {e}");
            return 1;
        }
    };
    for d in devs {
        println!("{}  guid {:016x}  {}", d.name, d.guid, d.node_type.name());
        let Ok(ctx) = Context::open(Some(&d.name)) else {
            continue;
        };
        let nports = ctx.attr().phys_port_cnt;
        for port in 1..=nports {
            match ctx.query_port(port) {
                Ok(a) => println!(
                    "  port {port}: {}  mtu {}  link {}",
                    a.state.name(),
                    a.active_mtu.bytes().unwrap_or(0),
                    a.link_layer.name()
                ),
                Err(e) => println!("  port {port}: {e}"),
            }
            if let Ok(t) = ctx.gid_table(port) {
                print!("{}", t.describe());
            }
        }
    }
    0
}
