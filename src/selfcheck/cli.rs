//! `rdmaperf selfcheck` on a device: flags, device facts, the verbs
//! methods' cases, direct's set-up, the table, `--json`.

use clap::Parser;

use super::cases::Tr;
use super::direct_rig::DirectRig;
use super::raw_cases::{raw_json, raw_summary, raw_table};
use super::raw_exec::run_raw;
use super::verbs_rig::{qp_type, Dev, VerbsRig};
use super::{json, run_method, summary, table, MethodRun};
use crate::mlx5::device::HwSteps;
use crate::mlx5::env::Mlx5Env;
use crate::mlx5::setup::{set_up, DirectQpAttr};
use crate::post::wr_api::{send_ops_flags, wr_api_probe};
use crate::raw::preflight::cap_refusal;
use crate::sys;
use crate::tool::setup::method::Method;
use crate::verbs::{Cq, Qp};

#[derive(Parser, Debug)]
#[command(
    name = "rdmaperf selfcheck",
    about = "Check every post method on this device in loopback (every op, post lists, inline, \
             ring wrap, a bad rkey and recovery); exit status 1 if anything failed"
)]
struct Args {
    /// The device (default: the first one).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// Also write the results as JSON to this file (attach it to a bug report).
    #[arg(long = "json")]
    json: Option<String>,
}

/// Runs `rdmaperf selfcheck <args>`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let argv = std::iter::once("rdmaperf selfcheck".to_string()).chain(args.iter().cloned());
    let a = match Args::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let dev = match Dev::open(a.dev.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            // Not a refusal of the command line: the device did not open (status 1, as
            // the tools give for it).
            eprintln!("rdmaperf selfcheck: {e}{}", open_hint(a.dev.as_deref()));
            return 1;
        }
    };
    let env = Mlx5Env::from_process();
    let (mut facts, direct) = device_facts(&dev, &env);
    let mut runs = Vec::new();
    for m in [Method::PostSend, Method::WrApi] {
        if m == Method::WrApi {
            if let Err(why) = wr_api_probe(&dev.ctx, qp_type(Tr::Rc), send_ops_flags(Tr::Rc.ops()))
            {
                runs.push(MethodRun::unavailable("wr-api", why.to_string()));
                continue;
            }
        }
        eprintln!(" selfcheck: {} ...", m.name());
        runs.push(run_method(
            m.name(),
            |tr| VerbsRig::new(&dev, tr, m).map(|r| Box::new(r) as Box<dyn super::exec::Rig + '_>),
            |_, _, _| {},
        ));
    }
    runs.push(match direct {
        Err(why) => MethodRun::unavailable("direct", why),
        Ok(()) => {
            eprintln!(" selfcheck: direct ...");
            run_method(
                "direct",
                |tr| {
                    DirectRig::new(&dev, tr, &env)
                        .map(|r| Box::new(r) as Box<dyn super::exec::Rig + '_>)
                },
                |_, _, _| {},
            )
        }
    });
    facts.push(("env".into(), env.to_string()));
    let why = raw_skip_reason(&dev);
    let raw = run_raw(|| Err(why.clone()), |_, _, _| {});
    let mut out = String::new();
    for (k, v) in &facts {
        out.push_str(&format!(" {k:<22}: {v}\n"));
    }
    out.push_str(&table(&runs));
    out.push_str(&raw_table(&raw));
    let (line, ok) = summary(&runs);
    out.push_str(&line);
    let (raw_line, raw_ok) = raw_summary(&raw);
    out.push_str(&raw_line);
    let ok = ok && raw_ok;
    print!("{out}");
    if let Some(f) = &a.json {
        let mut j = json(&facts, &runs);
        j["raw"] = raw_json(&raw);
        if let Err(e) = std::fs::write(f, serde_json::to_string_pretty(&j).unwrap_or_default()) {
            eprintln!("rdmaperf selfcheck: writing {f}: {e}");
            return 2;
        }
    }
    if ok {
        0
    } else {
        1
    }
}

/// Why the raw cases do not run on this device: not mlx5, not an Ethernet
/// port, no CAP_NET_RAW; and on a ConnectX Ethernet port with it, that
/// selfcheck does not open a raw packet QP on a device yet (they run on the
/// queue model in the tests).
fn raw_skip_reason(dev: &Dev) -> String {
    let name = dev.ctx.name();
    // SAFETY: the device pointer comes from the open context.
    if !unsafe { sys::mlx5dv_is_supported((*dev.ctx.raw()).device) } {
        return format!(
            "{name} is not an mlx5 device: the direct raw SQ needs a ConnectX (-d mlx5_N)"
        );
    }
    if dev.grh.is_none() {
        return format!("{name} port 1 is InfiniBand: raw Ethernet needs an Ethernet port");
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(refusal) = cap_refusal("rdmaperf selfcheck", &status) {
        return refusal;
    }
    "selfcheck does not open a raw packet QP on a device yet; the raw cases run on the queue \
     model (cargo test --features model --test selfcheck_raw)"
        .into()
}

/// What to do when the device did not open: name one with -d, unless one was named.
fn open_hint(dev: Option<&str>) -> String {
    match dev {
        None => "; give the device with -d (see `rdmaperf devices`)".into(),
        Some(d) => format!(" (-d {d}: `rdmaperf devices` lists this host's devices)"),
    }
}

/// Name, vendor part, firmware, link layer, limits; and what the direct
/// set-up reports (bf.size, wqe_cnt, CQE size, thread domain) or why it
/// cannot run.
fn device_facts(dev: &Dev, env: &Mlx5Env) -> (Vec<(String, String)>, Result<(), String>) {
    let a = dev.ctx.attr();
    let mut f: Vec<(String, String)> = vec![
        ("device".into(), dev.ctx.name().to_string()),
        (
            "vendor / part".into(),
            format!(
                "{:#x} / {} (hw rev {})",
                a.vendor_id, a.vendor_part_id, a.hw_ver
            ),
        ),
        ("firmware".into(), a.fw_ver.clone()),
        (
            "link layer".into(),
            if dev.grh.is_some() {
                "Ethernet (RoCE)"
            } else {
                "InfiniBand"
            }
            .into(),
        ),
        ("max_qp_wr".into(), a.max_qp_wr.to_string()),
        ("atomic_cap".into(), format!("{}", a.atomic_cap.0)),
    ];
    if let Ok(cq) = Cq::new(&dev.ctx, 4, false) {
        for tr in Tr::ALL {
            let n = Qp::probe_max_inline(&dev.pd, &cq, qp_type(tr), 1024);
            f.push((format!("max inline ({})", tr.name()), format!("{n} B")));
        }
    }
    let direct = direct_facts(dev, env, &mut f);
    (f, direct)
}

fn direct_facts(dev: &Dev, env: &Mlx5Env, f: &mut Vec<(String, String)>) -> Result<(), String> {
    // SAFETY: the device pointer comes from the open context.
    let mlx5 = unsafe { sys::mlx5dv_is_supported((*dev.ctx.raw()).device) };
    f.push(("mlx5dv".into(), if mlx5 { "yes" } else { "no" }.into()));
    if !mlx5 {
        return Err(format!(
            "{} is not an mlx5 device (mlx5dv_is_supported() is false)",
            dev.ctx.name()
        ));
    }
    let cq = Cq::new(&dev.ctx, 256, false).map_err(|e| e.to_string())?;
    let attr = DirectQpAttr::rc(128, dev.ctx.attr().atomic_cap.0 != 0);
    // SAFETY: context, PD and CQ are live and outlive the QP (dropped at
    // the end of this function).
    let mut steps = unsafe { HwSteps::new(dev.ctx.raw(), dev.pd.raw(), cq.raw(), cq.raw()) };
    let done = set_up(&mut steps, 1, &attr, env).map_err(|e| e.to_string())?;
    f.push(("thread domain".into(), "yes (dedicated UAR per QP)".into()));
    if let Some((_, dv)) = done.qps.first() {
        f.push(("bf.size".into(), dv.bf.size.to_string()));
        f.push(("sq.wqe_cnt (128 WRs)".into(), dv.sq.wqe_cnt.to_string()));
    }
    f.push(("CQE size".into(), done.cq.cqe_size.to_string()));
    if let Some(n) = env.doorbell_note() {
        f.push(("doorbell".into(), n));
    }
    Ok(())
}
