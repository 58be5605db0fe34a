# shellcheck shell=bash
# NCCL settings for multi-node training over InfiniBand or RoCE.
#
# Sourced by ddp-multi-node.sbatch before it starts torchrun; srun passes the
# exported variables on to every node. Every value below is a default: a
# variable already set in the environment you submit from (or in the batch
# script before this file is sourced) wins, so one file serves every job:
#
#   TRAINING_FABRIC=roce NCCL_IB_HCA==mlx5_0,mlx5_1 sbatch ddp-multi-node.sbatch
#
# Cluster-wide values belong in /etc/nccl.conf on the nodes instead (same
# NAME=value lines, read by every NCCL job); keep here what differs per job.
# Reference: NCCL's "Environment Variables" chapter of its user guide.

# Which network NCCL should move data over between nodes (this file's switch,
# not a variable NCCL reads):
#   ib    InfiniBand: NCCL's IB verbs transport, GPUDirect RDMA where possible.
#   roce  RoCE (RDMA over Converged Ethernet): the same verbs transport over
#         Ethernet NICs; also needs the GID index and usually a traffic class.
#   tcp   plain TCP sockets: no RDMA NIC, or to rule the fabric out when
#         debugging. Much slower; never for real multi-node training.
TRAINING_FABRIC="${TRAINING_FABRIC:-ib}"

# NCCL_DEBUG: WARN prints only problems. Set NCCL_DEBUG=INFO for one run to
# see which transport NCCL picked ("NET/IB" means RDMA, "NET/Socket" means
# TCP) and which HCAs and interfaces it uses; NCCL_DEBUG_SUBSYS=INIT,NET keeps
# that output to the lines that matter.
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"

# NCCL_SOCKET_IFNAME: the IP interfaces NCCL uses for its bootstrap (and for
# all traffic with TRAINING_FABRIC=tcp). "^" excludes by prefix: loopback and the
# bridges and veth pairs of containers and VMs, which exist on many nodes but
# do not reach the other nodes. Name your cluster network to be exact, for
# example NCCL_SOCKET_IFNAME==ens1f0 ("=" matches the whole name).
export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-^lo,docker,veth,virbr}"

case "$TRAINING_FABRIC" in
  ib | roce)
    # NCCL_IB_HCA: which RDMA devices (and ports) to use. Unset, NCCL uses
    # every active one it finds, which is right on most GPU nodes. Set it to
    # leave out a device that is not on the training fabric (a storage or
    # management NIC), e.g. NCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_2,mlx5_3 or
    # NCCL_IB_HCA=^mlx5_4 ("=" exact names, "^" exclude, ":1" a port).
    # `ibv_devinfo -l` lists the devices, `ibstat` their ports and state.
    if [[ -n "${NCCL_IB_HCA:-}" ]]; then
      export NCCL_IB_HCA
    fi
    ;;
  tcp)
    export NCCL_IB_DISABLE=1
    ;;
  *)
    echo "nccl-env.sh: TRAINING_FABRIC must be ib, roce or tcp, not '$TRAINING_FABRIC'" >&2
    return 1
    ;;
esac

if [[ "$TRAINING_FABRIC" == roce ]]; then
  # NCCL_IB_GID_INDEX: which entry of the port's GID table carries RoCE v2
  # with the node's IP address. NCCL 2.21 and later find it themselves (the
  # default, -1), so it is only set here when you set it. For an older NCCL,
  # or to force it, look it up with `show_gids` (MLNX_OFED/DOCA) or
  # `ibv_devinfo -v` and set it: 3 is the usual index of the IPv4 RoCE v2
  # entry on ConnectX NICs with one IPv4 address.
  if [[ -n "${NCCL_IB_GID_INDEX:-}" ]]; then
    export NCCL_IB_GID_INDEX
  fi
  # NCCL_IB_TC: the traffic class of NCCL's RDMA packets. A lossless RoCE
  # network (PFC/ECN) is configured for one priority; ask the network team
  # which (106 is a common value, DSCP 26). Unset, the NIC's default is used.
  if [[ -n "${NCCL_IB_TC:-}" ]]; then
    export NCCL_IB_TC
  fi
fi

# One line in the job's output with what NCCL will see, for later debugging.
echo "nccl-env.sh: fabric=$TRAINING_FABRIC $(env | grep '^NCCL_' | sort | tr '\n' ' ')" >&2
