//! mlx5 data the model tests feed the direct path.

use rdmaperf::mlx5::seg::DatagramSeg;

/// An AV as libmlx5 lays one out for an IB AH (LID 1, SL 0, no GRH).
pub fn libmlx5_av() -> [u8; 48] {
    DatagramSeg::new(0, 0, 0, 0, 0, 0x0001, [0; 6], 0, 64, 0, [0; 16]).to_bytes()
}
