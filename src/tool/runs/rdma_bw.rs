//! write-bw / read-bw / atomic-bw, unidirectional: open the device and the
//! control session, then run it (`bw_session`), or — `--threads` against
//! stock perftest — one session per thread (`threads_stock`).

use super::bw_session::run_session;
use super::threads_stock;
use crate::cli::params::Params;
use crate::tool::common::fail::Fail;
use crate::tool::common::out::Out;
use crate::tool::common::scenario::qp_type;
use crate::tool::session::bw_result::SizeSummary;
use crate::tool::session::control::connect;
use crate::tool::setup::method;
use crate::tool::setup::resources::Endpoint;

/// Runs one side; the client returns what it measured per size (the server nothing).
pub fn run(p: &Params, out: Out) -> Result<Vec<SizeSummary>, Fail> {
    let ep = Endpoint::open(p)?;
    let method = method::resolve(&ep.ctx, p, qp_type(p), &[p.op()])?;
    let mut sess = connect(p, &ep)?;
    if p.threads > 1 && !p.is_server() {
        // Against stock perftest, thread i talks to its own server on port
        // p+i (one stock process per port, as NVIDIA's scripts run them);
        // between two rdmaperf ends one connection carries every thread.
        let peer = crate::tool::common::peer_check::versions(&mut sess, p)?;
        if !peer.is_rdmaperf() {
            return threads_stock::run(p, out, &ep, method, sess);
        }
    }
    run_session(p, out, &ep, method, sess)
}
