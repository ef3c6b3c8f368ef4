//! Choosing the post method once, before the loop: `--post auto|post-send|wr-api|direct`.

use super::Fail;
use crate::cli::params::{Params, PostChoice};
use crate::post::wr_api::{send_ops_flags, wr_api_probe};
use crate::post::Op;
use crate::verbs::{Context, QpType};
use std::sync::Arc;

/// The method that will run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Method {
    PostSend,
    WrApi,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::PostSend => "post-send",
            Method::WrApi => "wr-api",
        }
    }
}

fn mlx5dv_supported(ctx: &Context) -> bool {
    // SAFETY: the device pointer comes from an open context and stays valid
    // while `ctx` lives; mlx5dv_is_supported only reads the device's ops.
    unsafe { crate::sys::mlx5dv_is_supported((*ctx.raw()).device) }
}

/// Resolve the user's choice against what the device can do. Asking for a
/// method the device can't run is an error, never a silent fallback.
pub fn resolve(
    ctx: &Arc<Context>,
    p: &Params,
    qp_type: QpType,
    ops: &[Op],
) -> Result<Method, Fail> {
    let flags = send_ops_flags(ops);
    match p.post {
        PostChoice::PostSend => Ok(Method::PostSend),
        PostChoice::WrApi => match wr_api_probe(ctx, qp_type, flags) {
            Ok(()) => Ok(Method::WrApi),
            Err(e) => Err(Fail::new(format!(
                "--post wr-api: device {} does not accept the WR API for this test ({e}); use --post post-send",
                ctx.name()
            ))),
        },
        PostChoice::Direct => {
            if mlx5dv_supported(ctx) {
                Err(Fail::new(format!(
                    "--post direct: the mlx5 direct path is not wired into the tools yet on {}; use --post wr-api",
                    ctx.name()
                )))
            } else {
                Err(Fail::new(format!(
                    "--post direct: device {} is not an mlx5 (ConnectX) device — mlx5dv_is_supported() is false and \
                     mlx5dv_init_obj() returns EOPNOTSUPP for its queues; use --post wr-api or --post post-send",
                    ctx.name()
                )))
            }
        }
        PostChoice::Auto => Ok(if wr_api_probe(ctx, qp_type, flags).is_ok() {
            Method::WrApi
        } else {
            Method::PostSend
        }),
    }
}
