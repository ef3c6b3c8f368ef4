//! The rdma-core release rdmaperf was built against and the one it runs on, and the
//! libibverbs entry points newer than the oldest release it supports (rdma-core 28,
//! Ubuntu 20.04 and early RHEL 8), looked up at run time.
//!
//! Why at run time: a verb the binary links by name carries its symbol version
//! (`ibv_reg_dmabuf_mr@IBVERBS_1.12`), and the loader refuses to start a binary whose
//! versions the host's libibverbs lacks, even for a verb this run never calls. So the
//! verbs newer than IBVERBS_1.8 (rdma-core 28) are never linked: they are found here with
//! `dlvsym` at the version the headers declare them with, and a caller whose verb is
//! missing falls back (the GID table) or refuses with [`needs`]'s sentence.
//!
//! The release: rdma-core names its library file `libibverbs.so.1.<IBVERBS_1.x>.<release>`
//! (libibverbs/CMakeLists.txt: `1.${ABI}.${PACKAGE_VERSION}`), so the last two numbers of
//! the file the loader picked (found with `dladdr`, symlinks followed) are the release it
//! runs on, and the same numbers in pkg-config's `libibverbs` version are the release it
//! was built against. A library whose file is named otherwise (a vendor build) is dated by
//! the newest symbol version it exports ([`IBVERBS_VERSIONS`]).

use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

use crate::sys;

/// IBVERBS_1.x symbol versions from rdma-core 28 on: the first release that exports
/// each, and one symbol of that version to probe it with (libibverbs.map.in).
pub const IBVERBS_VERSIONS: &[(&str, u32, &str)] = &[
    ("IBVERBS_1.17", 64, "ibv_reg_buf_mr"),
    ("IBVERBS_1.16", 62, "ibv_query_port_speed"),
    ("IBVERBS_1.15", 59, "ibv_reg_mr_ex"),
    ("IBVERBS_1.14", 36, "ibv_query_qp_data_in_order"),
    ("IBVERBS_1.13", 35, "ibv_import_dm"),
    ("IBVERBS_1.12", 34, "ibv_reg_dmabuf_mr"),
    ("IBVERBS_1.11", 32, "_ibv_query_gid_ex"),
    ("IBVERBS_1.10", 31, "ibv_query_ece"),
    ("IBVERBS_1.9", 30, "ibv_get_device_index"),
    ("IBVERBS_1.8", 28, "ibv_reg_mr_iova2"),
];

/// The first rdma-core release whose libibverbs exports `version`.
pub fn release_of(version: &str) -> Option<u32> {
    IBVERBS_VERSIONS
        .iter()
        .find(|v| v.0 == version)
        .map(|v| v.1)
}

/// "34.0" from libibverbs' library version "1.12.34.0" (a file name's tail or pkg-config's
/// `--modversion`): the release is the part after `1.<abi>.`.
pub fn release_from_lib_version(v: &str) -> Option<String> {
    let mut parts = v.split('.');
    let (one, abi, major) = (parts.next()?, parts.next()?, parts.next()?);
    let all_numbers = [one, abi, major].iter().all(|p| p.parse::<u32>().is_ok());
    if one != "1" || !all_numbers {
        return None;
    }
    let minor = parts.next().filter(|m| m.parse::<u32>().is_ok());
    Some(minor.map_or_else(|| major.to_string(), |m| format!("{major}.{m}")))
}

/// The rdma-core release build.rs bound, from pkg-config's `libibverbs` version
/// (the raw version when it is not rdma-core's scheme).
pub fn built_against() -> String {
    let v = env!("RDMAPERF_LIBIBVERBS_VERSION");
    match release_from_lib_version(v) {
        Some(r) => format!("rdma-core {r} (libibverbs {v})"),
        None => format!("libibverbs {v} (not rdma-core's version scheme)"),
    }
}

/// The rdma-core this process runs on, as [`runs_on`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runtime {
    /// The release ("28.0"), or "NN or newer" when only the symbol versions date it.
    pub release: String,
    /// The library file the loader picked, when `dladdr` names it.
    pub file: Option<String>,
}

/// The rdma-core release of the libibverbs this process loaded (see the module comment).
pub fn runs_on() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        let file = loaded_file();
        let from_name = file.as_deref().and_then(|f| {
            let name = f.rsplit('/').next()?;
            release_from_lib_version(name.strip_prefix("libibverbs.so.")?)
        });
        let release = from_name.unwrap_or_else(|| match newest_version() {
            Some((v, r, _)) => format!("{r} or newer (exports {v})"),
            None => "older than 28 (no IBVERBS_1.8)".to_string(),
        });
        Runtime { release, file }
    })
}

/// The newest IBVERBS_1.x version the loaded libibverbs exports.
fn newest_version() -> Option<&'static (&'static str, u32, &'static str)> {
    IBVERBS_VERSIONS
        .iter()
        .find(|(v, _, sym)| !lookup(sym, v).is_null())
}

/// The real path of the loaded libibverbs (symlinks followed).
fn loaded_file() -> Option<String> {
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    let addr = sys::ibv_get_device_list as *const c_void;
    // SAFETY: `addr` is a function of the loaded libibverbs and `info` a valid out-struct.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr set dli_fname to the object's NUL-terminated path, valid while loaded.
    let path = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
    let real = std::fs::canonicalize(path.as_ref()).ok()?;
    Some(real.to_string_lossy().into_owned())
}

/// `name` at symbol version `version` in the loaded libraries, or null.
fn lookup(name: &str, version: &str) -> *mut c_void {
    let (Ok(n), Ok(v)) = (
        std::ffi::CString::new(name),
        std::ffi::CString::new(version),
    ) else {
        return std::ptr::null_mut();
    };
    // SAFETY: both strings are NUL-terminated; RTLD_DEFAULT searches the loaded objects,
    // libibverbs among them (the binary links it).
    unsafe { libc::dlvsym(libc::RTLD_DEFAULT, n.as_ptr(), v.as_ptr()) }
}

/// The refusal for a feature whose verb this host's libibverbs lacks.
pub fn needs(what: &str, version: &str) -> String {
    let release = release_of(version).map_or_else(|| "?".to_string(), |r| r.to_string());
    format!(
        "{what} needs rdma-core {release} ({version}); this host has rdma-core {}: \
         install a newer rdma-core (libibverbs1, ibverbs-providers) or run without it",
        runs_on().release
    )
}

/// `ibv_reg_dmabuf_mr` (IBVERBS_1.12, rdma-core 34). Its prototype is spelled here, not
/// taken from the headers, so a build on rdma-core 28's headers still has it: the
/// signature has not changed since the verb appeared.
pub type RegDmabufMr = unsafe extern "C" fn(
    pd: *mut sys::ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: libc::c_int,
    access: libc::c_int,
) -> *mut sys::ibv_mr;

/// `ibv_reg_dmabuf_mr`, or [`needs`]'s sentence when this host's libibverbs lacks it.
pub fn reg_dmabuf_mr() -> Result<RegDmabufMr, String> {
    static F: OnceLock<usize> = OnceLock::new();
    let p = *F.get_or_init(|| lookup("ibv_reg_dmabuf_mr", "IBVERBS_1.12") as usize);
    if p == 0 {
        return Err(needs(
            "dma-buf registration (ibv_reg_dmabuf_mr)",
            "IBVERBS_1.12",
        ));
    }
    // SAFETY: the symbol IBVERBS_1.12 names is ibv_reg_dmabuf_mr, whose C prototype
    // RegDmabufMr spells; a non-null function address converts to a function pointer.
    Ok(unsafe { std::mem::transmute::<usize, RegDmabufMr>(p) })
}

/// `_ibv_query_gid_ex` (IBVERBS_1.11, rdma-core 32), which the header's inline
/// `ibv_query_gid_ex` calls with the entry's size last. Only where the headers declare
/// `struct ibv_gid_entry` (build.rs sets `rdmaperf_gid_ex`).
#[cfg(rdmaperf_gid_ex)]
pub type QueryGidEx = unsafe extern "C" fn(
    ctx: *mut sys::ibv_context,
    port: u32,
    index: u32,
    entry: *mut sys::ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> libc::c_int;

/// `_ibv_query_gid_ex`, or None where the host's libibverbs predates it.
#[cfg(rdmaperf_gid_ex)]
pub fn query_gid_ex() -> Option<QueryGidEx> {
    static F: OnceLock<usize> = OnceLock::new();
    let p = *F.get_or_init(|| lookup("_ibv_query_gid_ex", "IBVERBS_1.11") as usize);
    // SAFETY: the symbol IBVERBS_1.11 names is _ibv_query_gid_ex, whose C prototype
    // QueryGidEx spells; a non-null function address converts to a function pointer.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, QueryGidEx>(p) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_from_the_library_version() {
        for (lib, want) in [
            ("1.14.44.0", Some("44.0")),
            ("1.8.28.0", Some("28.0")),
            ("1.12.34", Some("34")),
            ("1", None),
            ("2.1.3.0", None),
            ("1.x.3.0", None),
        ] {
            assert_eq!(release_from_lib_version(lib).as_deref(), want, "{lib}");
        }
    }

    #[test]
    fn every_version_dates_a_release_in_order() {
        let releases: Vec<u32> = IBVERBS_VERSIONS.iter().map(|v| v.1).collect();
        assert!(releases.windows(2).all(|w| w[0] > w[1]), "{releases:?}");
        assert_eq!(release_of("IBVERBS_1.12"), Some(34));
        assert_eq!(release_of("IBVERBS_1.11"), Some(32));
        assert_eq!(release_of("IBVERBS_1.1"), None);
    }

    /// The loaded libibverbs is named by its file, and its file's release agrees with the
    /// newest symbol version it exports (the two ways of dating it).
    #[test]
    fn the_running_release_is_found_both_ways() {
        let rt = runs_on();
        let file = rt.file.as_deref().expect("dladdr names libibverbs");
        assert!(file.contains("libibverbs.so"), "{file}");
        let major: u32 = rt
            .release
            .split('.')
            .next()
            .unwrap()
            .parse()
            .expect(&rt.release);
        let (_, first, _) = newest_version().expect("IBVERBS_1.8 or newer");
        assert!(
            major >= *first,
            "{} exports a newer version than its release",
            rt.release
        );
    }

    #[test]
    fn needs_names_the_release_the_version_and_this_host() {
        let s = needs("dma-buf registration", "IBVERBS_1.12");
        assert!(s.contains("needs rdma-core 34 (IBVERBS_1.12)"), "{s}");
        assert!(
            s.contains(&format!("this host has rdma-core {}", runs_on().release)),
            "{s}"
        );
    }
}
