# The mpi check's program (roles/validate/tasks/check_mpi.yml runs it with
# python3 -c under srun --mpi=...): one rank per node. Every rank contributes
# its rank to an allreduce(SUM) and its Slurm node name to a gather; rank 0 prints one
# JSON line that validation.mpi_result judges (size, sum, hosts, library).
import json
import os

from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank(), op=MPI.SUM)
hosts = comm.gather(os.environ.get("SLURMD_NODENAME") or MPI.Get_processor_name(), root=0)
if comm.Get_rank() == 0:
    library = MPI.Get_library_version().splitlines()[0].strip()
    print(json.dumps({"size": comm.Get_size(), "sum": total, "hosts": hosts, "library": library}))
