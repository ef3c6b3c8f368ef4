//! perftest's device-dependent parameter rules, applied before a tool opens
//! its resources. Today: inline data. perftest (4.5 and master,
//! `ctx_set_max_inline`) sends inline only on devices it recognises by PCI
//! vendor and part ID (`ib_dev_name`); on any other device (soft-RoCE,
//! for one) it turns inline off, with a notice when `-I` asked for it.
//! We follow the rule so the same flags run the same test.
//!
//! And the HW rate limit: perftest applies it only on InfiniBand links (a
//! RoCE QP does not pace by its address vector's static rate); without
//! `--rate_limit_type` it falls back to the SW limiter there, with a notice.

use super::fail::Fail;
use crate::cli::params::{Conn, Params};
use crate::cli::rate::RateKind;
use crate::verbs::Context;

/// The part IDs perftest master's `ib_dev_name` knows when the vendor ID
/// is none of the ones it checks first (ConnectX, BlueField, Broadcom,
/// EFA, ERDMA, HNS, ...), as listed there.
const KNOWN_PARTS: &[u32] = &[
    4099, 4100, 4103, 4104, 4113, 4115, 4116, 4117, 4118, 4119, 4120, 4121, 4122, 4123, 4124, 4125,
    4126, 4127, 4129, 4131, 4133, 4135, 41682, 41683, 41686, 41692, 41695, 26418, 26428, 26438,
    26448, 26458, 26468, 26478, 25408, 25418, 25428, 25448, 1824, 5684, 5700, 5716, 5718, 5734,
    32880, 32881, 32882, 32883, 32912, 33136, 33168, 5638, 5652, 5824, 5825, 5827, 5839, 5846,
    5847, 5848, 5849, 5855, 5858, 5859, 5861, 5867, 5869, 5871, 5872, 5873, 5968, 5984, 6169,
    55296, 55298, 55300, 61344, 61345, 61346, 61347, 61348, 4223, 41506, 41507, 41508, 41509,
    41510, 41512, 41519,
];

/// Whether perftest recognises the device (and so may send inline).
pub fn perftest_knows(vendor_id: u32, part: u32) -> bool {
    match vendor_id {
        // Chelsio: T4, T5, T6 by the part ID's top bits.
        5157 => matches!(part >> 12, 4 | 5 | 6 | 10 | 11),
        // Intel, Yunsilicon, Nebula, Pensando: every part.
        0x8086 | 0x1f67 | 0x1f0f | 0x1dd8 => true,
        0x209b => part == 0x1000,
        _ => KNOWN_PARTS.contains(&part),
    }
}

/// perftest's notice when `-I` meets a device it does not recognise.
pub const INLINE_NOTICE: &str = "Device not recognized to implement inline feature. Disabling it";

/// perftest's notice when the HW rate limit falls back to the SW one.
pub const HW_FALLBACK: &str = "The QP failed to accept HW rate limit, providing SW rate limit";

/// `p` with perftest's device rules applied (the device opened to read its IDs).
pub fn apply(p: &Params, out: super::out::Out) -> Result<Params, Fail> {
    let mut q = p.clone();
    let hw_fallback = p
        .rate
        .as_ref()
        .filter(|r| r.kind == RateKind::Hw && !r.kind_given);
    if q.inline_size == 0 && hw_fallback.is_none() {
        return Ok(q);
    }
    let ctx = Context::open(p.ib_dev.as_deref()).map_err(Fail::verbs)?;
    if let Some(r) = hw_fallback {
        let port = ctx.query_port(p.ib_port).map_err(Fail::verbs)?;
        if port.link_layer.is_ethernet() || p.conn == Conn::Ud {
            q.rate = Some(r.as_sw().map_err(Fail::new)?);
            if !out.quiet {
                out.print(crate::report::text::RESULT_LINE);
                let why = if p.conn == Conn::Ud {
                    "a UD QP has no address vector to hold a static rate".to_string()
                } else {
                    format!("{} port {} is Ethernet (RoCE)", ctx.name(), p.ib_port)
                };
                out.print(&format!("{HW_FALLBACK} ({why})\n"));
            }
        }
    }
    if q.inline_size == 0 {
        return Ok(q);
    }
    let a = ctx.attr();
    if !perftest_knows(a.vendor_id, a.vendor_part_id) {
        if p.inline_given && !out.quiet {
            out.print(crate::report::text::RESULT_LINE);
            eprintln!("{INLINE_NOTICE}");
        }
        q.inline_size = 0;
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connectx_and_friends_are_known_soft_roce_is_not() {
        assert!(perftest_knows(0x02c9, 4119), "ConnectX-5");
        assert!(perftest_knows(0x02c9, 41686), "BlueField-2");
        assert!(perftest_knows(5157, 0x6401), "Chelsio T6");
        assert!(perftest_knows(0x8086, 1));
        // rxe reports vendor 0xffffff, part 0.
        assert!(!perftest_knows(0xff_ffff, 0));
        assert!(!perftest_knows(0x02c9, 0));
        assert!(!perftest_knows(5157, 0x1000));
    }
}
