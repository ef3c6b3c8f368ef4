/* Input to bindgen (build.rs): the rdma-core headers rdmaperf binds.
 * Our own glue; the headers themselves come from the system (libibverbs-dev). */
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>
#include <rdma/rdma_cma.h>
