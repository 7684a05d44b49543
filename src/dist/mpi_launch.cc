#include "dist/mpi_launch.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace pagellm {
namespace {

volatile sig_atomic_t g_signal = 0;

void OnSignal(int sig) {
  g_signal = sig;
}

// The child of `parent` that mpirun started as rank 0 (0 when there is none yet).
pid_t FindRankZero(pid_t parent) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  pid_t found = 0;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != parent) continue;
    std::ifstream env("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string var;
    while (std::getline(env, var, '\0')) {
      if (var == "OMPI_COMM_WORLD_RANK=0") found = pid;
    }
    if (found != 0) break;
  }
  closedir(proc);
  return found;
}

}  // namespace

bool StartedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

int RunUnderMpirun(int num_ranks, int threads_per_rank, char** argv) {
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) {
    std::fprintf(stderr, "error: cannot find this executable (/proc/self/exe): %s\n",
                 std::strerror(errno));
    return 1;
  }
  self[len] = '\0';
  std::vector<std::string> args = {"mpirun", "-np", std::to_string(num_ranks), "--oversubscribe"};
  const unsigned cores = std::thread::hardware_concurrency();
  if (threads_per_rank > 0 &&
      static_cast<unsigned>(num_ranks) * static_cast<unsigned>(threads_per_rank) <= cores) {
    args.insert(args.end(),
                {"--map-by", "slot:PE=" + std::to_string(threads_per_rank), "--bind-to", "core"});
  } else {
    args.insert(args.end(), {"--bind-to", "none"});
  }
  args.push_back(self);
  for (int i = 1; argv[i] != nullptr; ++i) args.push_back(argv[i]);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "error: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    if (geteuid() == 0) {
      setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    execvp("mpirun", cargs.data());
    std::fprintf(stderr,
                 "error: %d ranks (--tensor-parallel-size x --pipeline-parallel-size) need "
                 "OpenMPI's mpirun to start them, and it cannot be run: %s (Debian: apt install "
                 "openmpi-bin)\n",
                 num_ranks, std::strerror(errno));
    _exit(127);
  }
  // The first SIGINT / SIGTERM goes to rank 0, which shuts its command down (a server drains)
  // and then the workers; a second one goes to mpirun, which ends every rank at once.
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;  // no SA_RESTART: waitpid returns EINTR
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  int status = 0;
  bool rank_zero_told = false;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "error: waitpid: %s\n", std::strerror(errno));
      return 1;
    }
    if (g_signal == 0) continue;
    const int sig = g_signal;
    g_signal = 0;
    const pid_t rank_zero = rank_zero_told ? 0 : FindRankZero(pid);
    rank_zero_told = rank_zero > 0;
    kill(rank_zero > 0 ? rank_zero : pid, sig);
  }
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code != 0 && code != 127)
      std::fprintf(stderr, "error: the %d tensor-parallel ranks ended with exit status %d\n",
                   num_ranks, code);
    return code;
  }
  std::fprintf(stderr, "error: mpirun ended by signal %d\n", WTERMSIG(status));
  return 1;
}

}  // namespace pagellm
