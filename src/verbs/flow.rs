//! Steering rules on a raw packet QP (`ibv_create_flow`): a [`FlowRule`]
//! says what to match, [`encode`] lays it out as libibverbs reads it (an
//! `ibv_flow_attr` followed by its specs), and a [`Flow`] is the attached
//! rule, destroyed (`ibv_destroy_flow`) when dropped, so every exit path,
//! errors and Ctrl-C included, releases it.
//!
//! The rule's layout follows perftest's `set_up_flow_rules`
//! (raw_ethernet_resources.c): an ETH spec, then an IPv4 (the `_ext` spec)
//! or IPv6 spec, then a TCP or UDP spec; `ALL_DEFAULT` (`--promiscuous`)
//! and `SNIFFER` (`--sniffer`) rules carry no spec.

use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::Arc;

use super::error::{last_errno, warn_if_failed, Result, VerbsError};
use super::qp::Qp;
use crate::sys;

/// Which rule (`enum ibv_flow_attr_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    /// Match the specs (`IBV_FLOW_ATTR_NORMAL`).
    Normal,
    /// Every packet no other rule takes (`IBV_FLOW_ATTR_ALL_DEFAULT`, `--promiscuous`).
    AllDefault,
    /// A copy of every packet (`IBV_FLOW_ATTR_SNIFFER`, `--sniffer`).
    Sniffer,
}

/// A value and its mask, as the specs hold them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Masked<T> {
    pub val: T,
    pub mask: T,
}

/// The IPv4 spec (`ibv_flow_spec_ipv4_ext`), addresses in network order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv4Match {
    pub src: Masked<[u8; 4]>,
    pub dst: Masked<[u8; 4]>,
    pub tos: Masked<u8>,
}

/// The IPv6 spec (`ibv_flow_spec_ipv6`); the flow label as a host value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv6Match {
    pub src: Masked<[u8; 16]>,
    pub dst: Masked<[u8; 16]>,
    pub traffic_class: Masked<u8>,
    pub flow_label: Masked<u32>,
}

/// The IP spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpMatch {
    V4(Ipv4Match),
    V6(Ipv6Match),
}

/// The TCP/UDP spec, ports as host values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct L4Match {
    pub tcp: bool,
    pub src_port: Masked<u16>,
    pub dst_port: Masked<u16>,
}

/// One steering rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRule {
    pub kind: FlowKind,
    pub port: u8,
    /// The ETH spec: the destination MAC and the ethertype (host value).
    pub dst_mac: Masked<[u8; 6]>,
    pub ether_type: Masked<u16>,
    pub ip: Option<IpMatch>,
    pub l4: Option<L4Match>,
}

impl FlowRule {
    /// A spec-less rule of `kind` on `port` (promiscuous or sniffer).
    pub fn bare(kind: FlowKind, port: u8) -> Self {
        Self {
            kind,
            port,
            dst_mac: Masked::default(),
            ether_type: Masked::default(),
            ip: None,
            l4: None,
        }
    }
}

/// The bytes of one encoded rule, 4-aligned as `ibv_flow_attr` needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedRule {
    words: Vec<u32>,
    len: usize,
}

impl EncodedRule {
    /// The rule's size in bytes (`ibv_flow_attr::size`).
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The bytes, as libibverbs reads them.
    pub fn bytes(&self) -> Vec<u8> {
        let mut b: Vec<u8> = self.words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        b.truncate(self.len);
        b
    }
    fn as_attr(&mut self) -> *mut sys::ibv_flow_attr {
        self.words.as_mut_ptr().cast()
    }
}

/// The size of the IP spec perftest adds (`get_ip_size`).
pub const fn ip_spec_size(v6: bool) -> usize {
    if v6 {
        size_of::<sys::ibv_flow_spec_ipv6>()
    } else {
        size_of::<sys::ibv_flow_spec_ipv4_ext>()
    }
}

/// `r` as `ibv_create_flow` takes it: the attribute, then the ETH, IP and
/// L4 specs (a `Normal` rule), none for the other kinds.
pub fn encode(r: &FlowRule) -> EncodedRule {
    let normal = r.kind == FlowKind::Normal;
    let mut specs: Vec<Vec<u8>> = Vec::new();
    if normal {
        specs.push(eth_spec(r));
        specs.extend(r.ip.as_ref().map(ip_spec));
        specs.extend(r.l4.as_ref().map(l4_spec));
    }
    let len = size_of::<sys::ibv_flow_attr>() + specs.iter().map(Vec::len).sum::<usize>();
    let attr = sys::ibv_flow_attr {
        comp_mask: 0,
        type_: match r.kind {
            FlowKind::Normal => sys::IBV_FLOW_ATTR_NORMAL,
            FlowKind::AllDefault => sys::IBV_FLOW_ATTR_ALL_DEFAULT,
            FlowKind::Sniffer => sys::IBV_FLOW_ATTR_SNIFFER,
        },
        size: len as u16,
        priority: 0,
        num_of_specs: specs.len() as u8,
        port: r.port,
        flags: 0,
    };
    let mut bytes = attr_bytes(&attr);
    for s in &specs {
        bytes.extend_from_slice(s);
    }
    let mut words = vec![0u32; len.div_ceil(4)];
    for (i, c) in bytes.chunks(4).enumerate() {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        words[i] = u32::from_ne_bytes(w);
    }
    EncodedRule { words, len }
}

/// A spec header: `type` (u32) and `size` (u16), host order, then `pad`
/// bytes of alignment before the filter.
fn header(ty: u32, size: usize, pad: usize) -> Vec<u8> {
    let mut b = ty.to_ne_bytes().to_vec();
    b.extend_from_slice(&(size as u16).to_ne_bytes());
    b.resize(b.len() + pad, 0);
    b
}

fn attr_bytes(a: &sys::ibv_flow_attr) -> Vec<u8> {
    let mut b = Vec::with_capacity(size_of::<sys::ibv_flow_attr>());
    b.extend_from_slice(&a.comp_mask.to_ne_bytes());
    b.extend_from_slice(&a.type_.to_ne_bytes());
    b.extend_from_slice(&a.size.to_ne_bytes());
    b.extend_from_slice(&a.priority.to_ne_bytes());
    b.extend_from_slice(&[a.num_of_specs, a.port, 0, 0]);
    b.extend_from_slice(&a.flags.to_ne_bytes());
    b
}

/// `ibv_flow_spec_eth`: the filter (dst, src MAC, ether_type, vlan_tag,
/// both network order) right after the 6-byte header.
fn eth_spec(r: &FlowRule) -> Vec<u8> {
    let size = size_of::<sys::ibv_flow_spec_eth>();
    let mut b = header(sys::IBV_FLOW_SPEC_ETH, size, 0);
    for (mac, et) in [
        (r.dst_mac.val, r.ether_type.val),
        (r.dst_mac.mask, r.ether_type.mask),
    ] {
        b.extend_from_slice(&mac);
        b.extend_from_slice(&[0; 6]);
        b.extend_from_slice(&et.to_be_bytes());
        b.extend_from_slice(&[0; 2]);
    }
    b.resize(size, 0);
    b
}

fn ip_spec(ip: &IpMatch) -> Vec<u8> {
    match ip {
        IpMatch::V4(m) => {
            let size = size_of::<sys::ibv_flow_spec_ipv4_ext>();
            let mut b = header(sys::IBV_FLOW_SPEC_IPV4_EXT, size, 2);
            // src_ip, dst_ip, proto, tos, ttl, flags: value, then mask.
            for (s, d, tos) in [
                (m.src.val, m.dst.val, m.tos.val),
                (m.src.mask, m.dst.mask, m.tos.mask),
            ] {
                b.extend_from_slice(&s);
                b.extend_from_slice(&d);
                b.extend_from_slice(&[0, tos, 0, 0]);
            }
            b.resize(size, 0);
            b
        }
        IpMatch::V6(m) => {
            let size = size_of::<sys::ibv_flow_spec_ipv6>();
            let mut b = header(sys::IBV_FLOW_SPEC_IPV6, size, 2);
            // src_ip, dst_ip, flow_label (network order), next_hdr,
            // traffic_class, hop_limit, one pad byte: value, then mask.
            for (s, d, fl, tc) in [
                (m.src.val, m.dst.val, m.flow_label.val, m.traffic_class.val),
                (
                    m.src.mask,
                    m.dst.mask,
                    m.flow_label.mask,
                    m.traffic_class.mask,
                ),
            ] {
                b.extend_from_slice(&s);
                b.extend_from_slice(&d);
                b.extend_from_slice(&fl.to_be_bytes());
                b.extend_from_slice(&[0, tc, 0, 0]);
            }
            b.resize(size, 0);
            b
        }
    }
}

fn l4_spec(m: &L4Match) -> Vec<u8> {
    let size = size_of::<sys::ibv_flow_spec_tcp_udp>();
    let ty = if m.tcp {
        sys::IBV_FLOW_SPEC_TCP
    } else {
        sys::IBV_FLOW_SPEC_UDP
    };
    let mut b = header(ty, size, 0);
    for (d, s) in [
        (m.dst_port.val, m.src_port.val),
        (m.dst_port.mask, m.src_port.mask),
    ] {
        b.extend_from_slice(&d.to_be_bytes());
        b.extend_from_slice(&s.to_be_bytes());
    }
    b.resize(size, 0);
    b
}

/// A rule attached to a QP; `ibv_destroy_flow` on drop. Holds the QP, so
/// the rule goes before it.
pub struct Flow {
    flow: NonNull<sys::ibv_flow>,
    _qp: Arc<Qp>,
}

// SAFETY: the handle is only passed to ibv_destroy_flow, once, from Drop;
// libibverbs objects may be used from any thread.
unsafe impl Send for Flow {}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow").finish_non_exhaustive()
    }
}

impl Flow {
    /// `ibv_create_flow(qp, rule)`.
    pub fn create(qp: &Arc<Qp>, rule: &FlowRule) -> Result<Flow> {
        Self::create_encoded(qp, &mut encode(rule))
    }

    /// `ibv_create_flow` with a rule encoded beforehand (the flow-rate loop
    /// times the verb alone).
    pub fn create_encoded(qp: &Arc<Qp>, enc: &mut EncodedRule) -> Result<Flow> {
        // SAFETY: the QP is live (Arc held); `enc` holds `size` bytes laid out
        // as an ibv_flow_attr followed by its specs, 4-aligned, and outlives
        // the call (libibverbs copies the rule into the kernel command).
        let f = unsafe { sys::ibv_create_flow(qp.raw(), enc.as_attr()) };
        let Some(flow) = NonNull::new(f) else {
            return Err(create_failed(qp, enc));
        };
        Ok(Flow {
            flow,
            _qp: Arc::clone(qp),
        })
    }
}

#[cold]
fn create_failed(qp: &Qp, enc: &EncodedRule) -> VerbsError {
    let b = enc.bytes();
    VerbsError::new(
        "ibv_create_flow",
        last_errno(),
        format!(
            "a steering rule (type {}, {} specs) on port {} of {}: flow steering needs a raw \
             packet QP on a ConnectX port, root or CAP_NET_RAW, and for mlx4 the module option \
             log_num_mgm_entry_size=-1",
            u32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
            b[12],
            b[13],
            qp.context().name(),
        ),
    )
}

impl Drop for Flow {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_flow and destroyed once, here, before
        // the QP it is attached to (the Arc field drops after this body).
        let ret = unsafe { sys::ibv_destroy_flow(self.flow.as_ptr()) };
        warn_if_failed("ibv_destroy_flow", ret);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    fn full(v6: bool, tcp: bool) -> FlowRule {
        let ip = if v6 {
            IpMatch::V6(Ipv6Match {
                src: Masked {
                    val: [1; 16],
                    mask: [0xff; 16],
                },
                dst: Masked {
                    val: [2; 16],
                    mask: [0xff; 16],
                },
                traffic_class: Masked {
                    val: 0x20,
                    mask: 0xff,
                },
                flow_label: Masked {
                    val: 0x12345,
                    mask: 0xfffff,
                },
            })
        } else {
            IpMatch::V4(Ipv4Match {
                src: Masked {
                    val: [10, 0, 0, 1],
                    mask: [0xff; 4],
                },
                dst: Masked {
                    val: [10, 0, 0, 2],
                    mask: [0xff; 4],
                },
                tos: Masked {
                    val: 0x10,
                    mask: 0xff,
                },
            })
        };
        FlowRule {
            kind: FlowKind::Normal,
            port: 1,
            dst_mac: Masked {
                val: [0x02, 0, 0, 0, 0, 1],
                mask: [0xff; 6],
            },
            ether_type: Masked::default(),
            ip: Some(ip),
            l4: Some(L4Match {
                tcp,
                src_port: Masked {
                    val: 5000,
                    mask: 0xffff,
                },
                dst_port: Masked {
                    val: 6000,
                    mask: 0xffff,
                },
            }),
        }
    }

    fn u16_at(b: &[u8], o: usize) -> u16 {
        u16::from_ne_bytes([b[o], b[o + 1]])
    }
    fn u32_at(b: &[u8], o: usize) -> u32 {
        u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
    }

    #[test]
    fn sizes_are_bindgens() {
        assert_eq!(size_of::<sys::ibv_flow_attr>(), 20);
        assert_eq!(size_of::<sys::ibv_flow_spec_eth>(), 40);
        assert_eq!(size_of::<sys::ibv_flow_spec_ipv4_ext>(), 32);
        assert_eq!(size_of::<sys::ibv_flow_spec_ipv6>(), 88);
        assert_eq!(size_of::<sys::ibv_flow_spec_tcp_udp>(), 16);
        for (v6, ip) in [(false, 32), (true, 88)] {
            let e = encode(&full(v6, false));
            assert_eq!(e.len(), 20 + 40 + ip + 16);
            assert_eq!(e.bytes().len(), e.len());
            assert_eq!(
                u16_at(&e.bytes(), offset_of!(sys::ibv_flow_attr, size)) as usize,
                e.len()
            );
        }
    }

    #[test]
    fn attr_fields_at_bindgens_offsets() {
        let b = encode(&full(false, true)).bytes();
        assert_eq!(
            u32_at(&b, offset_of!(sys::ibv_flow_attr, type_)),
            sys::IBV_FLOW_ATTR_NORMAL
        );
        assert_eq!(b[offset_of!(sys::ibv_flow_attr, num_of_specs)], 3);
        assert_eq!(b[offset_of!(sys::ibv_flow_attr, port)], 1);
        assert_eq!(u32_at(&b, offset_of!(sys::ibv_flow_attr, flags)), 0);
        assert_eq!(u16_at(&b, offset_of!(sys::ibv_flow_attr, priority)), 0);
    }

    #[test]
    fn eth_spec_at_bindgens_offsets() {
        let mut r = full(false, false);
        r.ether_type = Masked {
            val: 0x0800,
            mask: 0xffff,
        };
        let b = encode(&r).bytes();
        let s = &b[20..60];
        assert_eq!(
            u32_at(s, offset_of!(sys::ibv_flow_spec_eth, type_)),
            sys::IBV_FLOW_SPEC_ETH
        );
        assert_eq!(u16_at(s, offset_of!(sys::ibv_flow_spec_eth, size)), 40);
        let val = offset_of!(sys::ibv_flow_spec_eth, val);
        let mask = offset_of!(sys::ibv_flow_spec_eth, mask);
        let dst = offset_of!(sys::ibv_flow_eth_filter, dst_mac);
        let et = offset_of!(sys::ibv_flow_eth_filter, ether_type);
        assert_eq!(&s[val + dst..val + dst + 6], &[0x02, 0, 0, 0, 0, 1]);
        assert_eq!(&s[mask + dst..mask + dst + 6], &[0xff; 6]);
        assert_eq!(&s[val + et..val + et + 2], &[0x08, 0x00], "network order");
        assert_eq!(&s[mask + et..mask + et + 2], &[0xff, 0xff]);
    }

    #[test]
    fn ipv4_and_udp_specs_at_bindgens_offsets() {
        let b = encode(&full(false, false)).bytes();
        let ip = &b[60..92];
        let (v, m) = (
            offset_of!(sys::ibv_flow_spec_ipv4_ext, val),
            offset_of!(sys::ibv_flow_spec_ipv4_ext, mask),
        );
        assert_eq!(u32_at(ip, 0), sys::IBV_FLOW_SPEC_IPV4_EXT);
        assert_eq!(u16_at(ip, 4), 32);
        let src = offset_of!(sys::ibv_flow_ipv4_ext_filter, src_ip);
        let dst = offset_of!(sys::ibv_flow_ipv4_ext_filter, dst_ip);
        let tos = offset_of!(sys::ibv_flow_ipv4_ext_filter, tos);
        assert_eq!(&ip[v + src..v + src + 4], &[10, 0, 0, 1]);
        assert_eq!(&ip[v + dst..v + dst + 4], &[10, 0, 0, 2]);
        assert_eq!((ip[v + tos], ip[m + tos]), (0x10, 0xff));
        let l4 = &b[92..108];
        assert_eq!(u32_at(l4, 0), sys::IBV_FLOW_SPEC_UDP);
        assert_eq!(u16_at(l4, 4), 16);
        let v = offset_of!(sys::ibv_flow_spec_tcp_udp, val);
        let dp = offset_of!(sys::ibv_flow_tcp_udp_filter, dst_port);
        let sp = offset_of!(sys::ibv_flow_tcp_udp_filter, src_port);
        assert_eq!(&l4[v + dp..v + dp + 2], &6000u16.to_be_bytes());
        assert_eq!(&l4[v + sp..v + sp + 2], &5000u16.to_be_bytes());
    }

    #[test]
    fn ipv6_and_tcp_specs_at_bindgens_offsets() {
        let b = encode(&full(true, true)).bytes();
        let ip = &b[60..148];
        assert_eq!(u32_at(ip, 0), sys::IBV_FLOW_SPEC_IPV6);
        assert_eq!(u16_at(ip, 4), 88);
        let (v, m) = (
            offset_of!(sys::ibv_flow_spec_ipv6, val),
            offset_of!(sys::ibv_flow_spec_ipv6, mask),
        );
        let fl = offset_of!(sys::ibv_flow_ipv6_filter, flow_label);
        let tc = offset_of!(sys::ibv_flow_ipv6_filter, traffic_class);
        let dst = offset_of!(sys::ibv_flow_ipv6_filter, dst_ip);
        assert_eq!(&ip[v + dst..v + dst + 16], &[2; 16]);
        assert_eq!(&ip[v + fl..v + fl + 4], &0x12345u32.to_be_bytes());
        assert_eq!(&ip[m + fl..m + fl + 4], &0xfffffu32.to_be_bytes());
        assert_eq!((ip[v + tc], ip[m + tc]), (0x20, 0xff));
        assert_eq!(u32_at(&b[148..], 0), sys::IBV_FLOW_SPEC_TCP);
    }

    #[test]
    fn promiscuous_and_sniffer_carry_no_spec() {
        for (k, t) in [
            (FlowKind::AllDefault, sys::IBV_FLOW_ATTR_ALL_DEFAULT),
            (FlowKind::Sniffer, sys::IBV_FLOW_ATTR_SNIFFER),
        ] {
            let b = encode(&FlowRule::bare(k, 2)).bytes();
            assert_eq!(b.len(), 20);
            assert_eq!(u32_at(&b, 4), t);
            assert_eq!((b[12], b[13]), (0, 2));
        }
    }
}
