// Starting the ranks of a tensor-parallel group on one machine: `pagellm generate M -tp 2` runs
// itself again under OpenMPI's mpirun with 2 ranks, and the copies it starts see that they
// were started by mpirun and join its world instead (so an mpirun the user runs across
// machines, with a hostfile, works the same way). docs/PARALLELISM.md.
#pragma once

namespace pagellm {

// True when this process was started by mpirun (OpenMPI's OMPI_COMM_WORLD_SIZE, or a PMI/PMIx
// rank from another launcher).
bool StartedByMpi();

// Runs this executable with `argv` (argv[0] included) under `mpirun -np num_ranks` and returns
// its exit status once every rank has ended (1 with an error on stderr when mpirun cannot be
// started or a rank failed). --oversubscribe allows more ranks than cores; ranks are bound to
// threads_per_rank cores each when the machine has enough (--map-by slot:PE=threads_per_rank
// --bind-to core), else left unbound. As root, OpenMPI's allow-run-as-root variables are set.
// The first SIGINT or SIGTERM is passed on to rank 0 (which ends its command, then the
// workers), a second one to mpirun (which ends every rank). Transport
// settings come from the environment as OpenMPI reads it (OMPI_MCA_btl=self,tcp forces TCP).
int RunUnderMpirun(int num_ranks, int threads_per_rank, char** argv);

}  // namespace pagellm
