#include "support/child_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

namespace kiln::test {

int run_in_child(const std::function<int()>& body) {
    std::fflush(nullptr);  // what is buffered would otherwise be written twice
    const pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int result = 255;
        try {
            result = body();
        } catch (...) {
        }
        std::fflush(nullptr);
        ::_exit(result);
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace kiln::test
