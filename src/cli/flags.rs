//! Every flag perftest master's parser knows (`long_options` and the getopt
//! string in its `src/perftest_parameters.c`, plus 4.5's `--source_ip` and
//! `--inline_recv`), each either implemented by rdmaperf (parsed by clap in
//! `args`) or refused here, before clap sees it, with a sentence naming why.
//! Without this table clap would answer a perftest flag it lacks with its
//! generic error and a misleading "did you mean".

/// What rdmaperf does with one perftest flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Parsed by clap (`args::PerfArgs`) and honoured.
    Implemented,
    /// Refused: the reason, worded to follow "<flag>: ".
    Refused(&'static str),
}

/// One perftest flag.
#[derive(Clone, Copy, Debug)]
pub struct Flag {
    pub short: Option<char>,
    pub long: &'static str,
    /// Takes a value (`-s 64`, `--rate_limit=5`).
    pub arg: bool,
    pub status: Status,
}

const GPU: &str = "needs accelerator memory of a runtime rdmaperf does not load (it loads CUDA \
only: --use_cuda, --use_cuda_bus_id, --use_cuda_dmabuf) - use stock perftest built with that runtime";
const DATA_DIRECT: &str = "needs mlx5dv_reg_dmabuf_mr with DATA_DIRECT access (rdma-core 55+, \
ConnectX-8 class NICs); the rdma-core rdmaperf builds against (Debian 12's 44) lacks it, so \
rdmaperf does not offer it - use --use_cuda_dmabuf";
const DC: &str = "needs DC (Dynamically Connected) QPs, a ConnectX-only transport rdmaperf does \
not create (-c DC is refused too) - use -c RC";
const CRYPTO: &str = "needs ConnectX crypto/signature offload hardware (AES-XTS, T10-DIF), which \
rdmaperf does not program - use stock perftest on a ConnectX with crypto enabled";
const RAW_ETH: &str =
    "belongs to perftest's raw_ethernet_* tools (raw packet QPs) - use rdmaperf raw-eth-bw, \
raw-eth-lat, raw-eth-burst-lat or raw-eth-fs-rate (perftest's raw flags)";
const DUAL_PORT: &str =
    "needs a second port (perftest's dual-port mode); rdmaperf drives one port \
(-i) - run one rdmaperf per port instead";
const TPH: &str = "needs PCIe TPH steering tags on the MRs (ibv_reg_mr_ex with TPH hints: a NIC, \
PCIe path and kernel that support them), which rdmaperf does not set on any device - drop it";

const fn imp(short: Option<char>, long: &'static str, arg: bool) -> Flag {
    Flag {
        short,
        long,
        arg,
        status: Status::Implemented,
    }
}

const fn no(short: Option<char>, long: &'static str, arg: bool, why: &'static str) -> Flag {
    Flag {
        short,
        long,
        arg,
        status: Status::Refused(why),
    }
}

/// perftest master's flags (6.29), in its `long_options` order, then the
/// short-only letters of its getopt string and 4.5's extras.
pub const PERFTEST_FLAGS: &[Flag] = &[
    imp(Some('p'), "port", true),
    imp(Some('d'), "ib-dev", true),
    imp(Some('i'), "ib-port", true),
    imp(Some('m'), "mtu", true),
    imp(Some('s'), "size", true),
    imp(Some('n'), "iters", true),
    imp(Some('t'), "tx-depth", true),
    imp(Some('u'), "qp-timeout", true),
    imp(Some('S'), "sl", true),
    imp(Some('x'), "gid-index", true),
    imp(Some('a'), "all", false),
    imp(Some('F'), "CPU-freq", false),
    imp(Some('c'), "connection", true),
    imp(Some('q'), "qp", true),
    imp(Some('e'), "events", false),
    no(Some('X'), "vector", true, "not implemented yet in rdmaperf: the completion vector of the event channel is always 0; drop -X"),
    imp(Some('I'), "inline_size", true),
    imp(Some('o'), "outs", true),
    imp(Some('g'), "mcg", false),
    imp(Some('z'), "comm_rdma_cm", false),
    imp(Some('R'), "rdma_cm", false),
    imp(Some('T'), "tos", true),
    no(Some('L'), "hop_limit", true, "belongs to perftest's raw_ethernet_* tools (the IP TTL of raw packets; perftest refuses it for other QPs: 'Hop limit only valid for RawEth QP'); RC/UC/UD QPs use GRH hop limit 0xFF, as in perftest - drop -L"),
    imp(Some('h'), "help", false),
    imp(Some('M'), "MGID", true),
    imp(Some('r'), "rx-depth", true),
    imp(Some('b'), "bidirectional", false),
    imp(Some('Q'), "cq-mod", true),
    imp(Some('N'), "noPeak", false),
    imp(Some('V'), "version", false),
    imp(Some('C'), "report-cycles", false),
    imp(Some('H'), "report-histogrm", false),
    imp(Some('U'), "report-unsorted", false),
    imp(Some('A'), "atomic_type", true),
    no(Some('O'), "dualport", false, DUAL_PORT),
    imp(Some('l'), "post_list", true),
    imp(Some('D'), "duration", true),
    imp(Some('f'), "margin", true),
    no(Some('B'), "source_mac", true, RAW_ETH),
    no(Some('E'), "dest_mac", true, RAW_ETH),
    no(Some('J'), "dest_ip", true, RAW_ETH),
    // The long name is 4.5's --source_ip (master: --bind_source_ip), an
    // alias in args; the letter is master's raw_ethernet one (SHORT_ONLY).
    imp(Some('j'), "source_ip", true),
    no(Some('K'), "dest_port", true, RAW_ETH),
    no(Some('k'), "source_port", true, RAW_ETH),
    no(Some('Y'), "ethertype", true, RAW_ETH),
    imp(Some('w'), "limit_bw", true),
    imp(Some('y'), "limit_msgrate", true),
    no(Some('Z'), "server", false, RAW_ETH),
    no(Some('P'), "client", false, RAW_ETH),
    no(Some('v'), "mac_fwd", false, RAW_ETH),
    no(Some('G'), "use_rss", false, RAW_ETH),
    imp(Some('W'), "report-counters", true),
    no(None, "force-link", true, "not implemented yet in rdmaperf: the link layer is always the port's own (ibv_query_port) - drop --force-link"),
    no(None, "remote_mac", true, RAW_ETH),
    no(None, "local_mac", true, RAW_ETH),
    no(None, "remote_ip", true, RAW_ETH),
    no(None, "local_ip", true, RAW_ETH),
    no(None, "remote_port", true, RAW_ETH),
    no(None, "local_port", true, RAW_ETH),
    imp(None, "run_infinitely", false),
    imp(None, "report_gbits", false),
    imp(None, "use-srq", false),
    no(None, "no_lock", false, "not implemented yet in rdmaperf: lock-free thread domains (ibv_alloc_td, a ConnectX provider feature); rdmaperf's --threads give each thread its own QPs and CQ instead"),
    imp(None, "use-null-mr", false),
    imp(None, "report-both", false),
    imp(None, "reversed", false),
    imp(None, "pkey_index", true),
    no(None, "tcp", false, RAW_ETH),
    imp(None, "burst_size", true),
    no(None, "typical_pkt_size", true, "belongs to perftest's raw_ethernet_* tools: it only supports the PP rate limiter (perftest's rule), which perftest master allows on raw Ethernet QPs only (rdmaperf raw-eth-bw takes it) - drop it; --rate_limit_type=SW paces any bw test"),
    imp(None, "rate_limit", true),
    imp(None, "rate_limit_type", true),
    imp(None, "rate_units", true),
    imp(None, "output", true),
    imp(None, "cpu_util", false),
    imp(None, "out_json", false),
    imp(None, "out_json_file", true),
    imp(None, "latency_gap", true),
    imp(None, "flow_label", true),
    imp(None, "retry_count", true),
    no(None, "dont_xchg_versions", false, "is refused: stock perftest master itself aborts with it (the peer version stays empty and its version check fails), and rdmaperf needs the peer's version to pick the protocol - drop it"),
    imp(None, "payload_file_path", true),
    imp(None, "use_cuda", true),
    imp(None, "use_cuda_bus_id", true),
    imp(None, "use_cuda_dmabuf", false),
    imp(None, "use_cuda_pcie_mapping", false),
    no(None, "use_data_direct", false, DATA_DIRECT),
    imp(None, "cuda_mem_type", true),
    no(None, "use_musa", true, GPU),
    no(None, "use_musa_bus_id", true, GPU),
    no(None, "use_musa_dmabuf", false, GPU),
    no(None, "use_musa_pcie_mapping", false, GPU),
    no(None, "use_rocm", true, GPU),
    no(None, "use_rocm_dmabuf", false, GPU),
    no(None, "use_neuron", true, GPU),
    no(None, "use_neuron_dmabuf", false, GPU),
    no(None, "use_hl", true, GPU),
    no(None, "use_mlu", true, GPU),
    no(None, "use_mlu_dmabuf", false, GPU),
    no(None, "use_opencl", true, GPU),
    no(None, "opencl_platform_id", true, GPU),
    no(None, "use_ib_dm_dmabuf", true, "needs on-device memory (ibv_alloc_dm on a NIC that has it, exported as a dma-buf), which rdmaperf does not allocate on any device - drop it, or use stock perftest"),
    no(None, "gpu_touch", true, "needs a CUDA kernel touching the buffer under --odp (perftest's nvcc-built libperftest_kernels.so); rdmaperf launches no GPU kernels and runs no ODP on GPU memory - drop it"),
    imp(None, "mmap", true),
    imp(None, "mmap-offset", true),
    imp(None, "ipv6", false),
    imp(None, "ipv6-addr", false),
    no(None, "raw_ipv6", false, RAW_ETH),
    no(None, "report-per-port", false, DUAL_PORT),
    imp(None, "odp", false),
    imp(None, "use_hugepages", false),
    imp(None, "use_old_post_send", false),
    no(None, "promiscuous", false, RAW_ETH),
    no(None, "sniffer", false, RAW_ETH),
    no(None, "raw_mcast", false, RAW_ETH),
    imp(None, "mr_per_qp", false),
    no(None, "dlid", true, "not implemented yet in rdmaperf: a destination LID given by hand (InfiniBand only); the peer's LID comes from the exchange - drop --dlid"),
    imp(None, "tclass", true),
    imp(None, "wait_destroy", true),
    no(None, "flows", true, RAW_ETH),
    no(None, "flows_burst", true, RAW_ETH),
    no(None, "reply_every", true, RAW_ETH),
    imp(None, "perform_warm_up", false),
    no(None, "vlan_en", false, RAW_ETH),
    no(None, "vlan_pcp", true, RAW_ETH),
    imp(None, "recv_post_list", true),
    no(None, "aes_xts", false, CRYPTO),
    no(None, "encrypt_on_tx", false, CRYPTO),
    no(None, "sig_before", false, CRYPTO),
    no(None, "aes_block_size", true, CRYPTO),
    no(None, "kek_path", true, CRYPTO),
    no(None, "credentials_path", true, CRYPTO),
    no(None, "data_enc_keys_number", true, CRYPTO),
    no(None, "data_enc_key_app_path", true, CRYPTO),
    no(None, "log_dci_streams", true, DC),
    no(None, "log_active_dci_streams", true, DC),
    imp(None, "disable_pcie_relaxed", false),
    no(None, "use_ooo", false, "needs out-of-order data placement (a QP attribute the NIC and its driver must offer), which rdmaperf does not set on any device - drop it, or use stock perftest"),
    no(None, "congest_type", true, "needs the HNS (HiSilicon) direct-verbs congestion control interface, which rdmaperf does not use - drop it"),
    imp(None, "bind_source_ip", true),
    imp(None, "write_with_imm", false),
    imp(None, "send_with_imm", false),
    no(None, "no_enhanced_reorder", false, "needs out-of-order receive WRs (a receive capability the NIC must offer), which rdmaperf never enables on any device, so there is nothing to disable - drop it"),
    no(None, "unsolicited_write", false, "needs EFA SRD unsolicited write-with-immediate receive, and rdmaperf has no SRD (-c SRD is refused too) - drop it"),
    no(None, "connectionless", false, "not implemented yet in rdmaperf: a connectionless multicast server (part of -g multicast) - use stock ib_send_bw"),
    imp(None, "cqe_poll", true),
    no(None, "tph_mem", true, TPH),
    no(None, "cpu_id", true, TPH),
    no(None, "ph", true, TPH),
    no(None, "disable_dynamic_polling", false, "not implemented yet in rdmaperf: rdmaperf polls a fixed batch and has no dynamic polling to disable - drop it"),
    no(None, "sig_offload", false, CRYPTO),
    imp(None, "data_validation", false),
    no(None, "data_validation_debug", false, "is refused: it is the debug log of perftest master's validator threads (marker scans, races, retries), which rdmaperf's after-the-run check does not have - drop it; --data_validation prints its one VALIDATION line"),
    no(None, "pin_cores", true, "not implemented yet in rdmaperf under this name: give --cpus LIST, which keeps the run on those cores (with --threads N, one pinned worker per core)"),
    no(None, "numa_node", true, "not implemented yet in rdmaperf: NUMA binding - run under `numactl -N NODE -m NODE`; --threads pins workers to the device's NUMA-local cores by default"),
    no(None, "disable_numa", false, "not implemented yet in rdmaperf: rdmaperf does no NUMA binding unless --threads is given, so there is nothing to disable - drop it"),
    // perftest 4.5 only (removed from master).
    no(None, "inline_recv", true, "was removed from perftest master and not implemented in rdmaperf: inline receive (scatter to CQE) - drop it"),
];

/// Letters refused although their entry's long name works: perftest
/// master's `-j` is the raw_ethernet tools' source IP, while `--source_ip`
/// is 4.5's name for binding the control socket (master's --bind_source_ip).
const SHORT_REFUSED: &[(char, &str)] = &[(
    'j',
    "belongs to perftest's raw_ethernet_* tools in master (the raw packets' source IP); to \
     bind the control connection's source address give --bind_source_ip IP (4.5: --source_ip)",
)];

/// The table entry for a long name (with perftest's spelling), if any.
pub fn by_long(name: &str) -> Option<&'static Flag> {
    PERFTEST_FLAGS.iter().find(|f| f.long == name)
}

/// The table entry for a short letter, if any.
pub fn by_short(c: char) -> Option<&'static Flag> {
    PERFTEST_FLAGS.iter().find(|f| f.short == Some(c))
}

/// Walks a tool's arguments (after the subcommand) and refuses the first
/// perftest flag rdmaperf does not implement, with its reason. `takes_value`
/// says whether one of rdmaperf's own long flags (not in the table) consumes
/// the next word, so a value is never mistaken for a flag.
pub fn check(args: &[String], takes_value: impl Fn(&str) -> bool) -> Result<(), String> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        if a == "--" {
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            match by_long(name) {
                Some(f) => {
                    if let Status::Refused(why) = f.status {
                        return Err(format!("--{name}: {why}"));
                    }
                    if f.arg && !inline {
                        i += 1;
                    }
                }
                None if !inline && takes_value(name) => i += 1,
                None => {}
            }
        } else if let Some(shorts) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            for (k, c) in shorts.char_indices() {
                if let Some((_, why)) = SHORT_REFUSED.iter().find(|r| r.0 == c) {
                    return Err(format!("-{c}: {why}"));
                }
                let Some(f) = by_short(c) else { break };
                if let Status::Refused(why) = f.status {
                    return Err(format!("-{c} (--{}): {why}", f.long));
                }
                if f.arg {
                    // The rest of the word is the value, or the next word is.
                    if k + c.len_utf8() == shorts.len() {
                        i += 1;
                    }
                    break;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_args::v;
    fn chk(a: &[&str]) -> Result<(), String> {
        check(&v(a), |n| n == "post")
    }

    #[test]
    fn refuses_with_reason() {
        // --use_cuda is implemented (cli::gpu_opts); ROCm is not.
        assert!(chk(&["-s", "64", "--use_cuda=0"]).is_ok());
        let e = chk(&["-s", "64", "--use_rocm=0"]).unwrap_err();
        assert!(e.starts_with("--use_rocm: needs accelerator memory"), "{e}");
        let e = chk(&["-O"]).unwrap_err();
        assert!(e.starts_with("-O (--dualport): needs a second port"), "{e}");
        let e = chk(&["-aO"]).unwrap_err();
        assert!(e.contains("dualport"), "{e}");
        // -j is master's raw_ethernet letter; --source_ip is 4.5's bind flag.
        let e = chk(&["-j", "169.254.7.2"]).unwrap_err();
        assert!(
            e.starts_with("-j: belongs to perftest's raw_ethernet")
                && e.contains("--bind_source_ip"),
            "{e}"
        );
        assert!(chk(&["--source_ip", "169.254.7.2"]).is_ok());
    }

    #[test]
    fn values_are_not_flags() {
        // "-O" here is a value of -d / of rdmaperf's --post, not the flag.
        assert!(chk(&["-d", "-O"]).is_ok());
        assert!(chk(&["-d-O"]).is_ok());
        assert!(chk(&["--post", "-O"]).is_ok());
        assert!(chk(&["--", "-O"]).is_ok());
        assert!(chk(&["--ib-dev=-O", "host"]).is_ok());
    }

    #[test]
    fn table_is_consistent() {
        for (k, f) in PERFTEST_FLAGS.iter().enumerate() {
            assert!(
                PERFTEST_FLAGS[k + 1..]
                    .iter()
                    .all(|g| g.long != f.long && (f.short.is_none() || g.short != f.short)),
                "duplicate entry for --{}",
                f.long
            );
            if let Status::Refused(why) = f.status {
                assert!(why.len() > 30, "--{}: the reason is too short", f.long);
            }
        }
    }
}
