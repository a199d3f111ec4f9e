/* A program outside kiln's tree, built against an installed kiln (with
 * find_package(kiln) or pkg-config): it loads a model and prints what it is. */
#include <kiln.h>
#include <stdio.h>

int main(int argc, char** argv) {
    kiln_model* model = NULL;
    kiln_model_info info;
    if (argc != 2) {
        fprintf(stderr, "usage: consumer MODEL\n");
        return 2;
    }
    if (kiln_model_load(argv[1], &model) != KILN_OK || kiln_model_get_info(model, &info) != KILN_OK) {
        fprintf(stderr, "consumer: %s\n", kiln_last_error());
        return 1;
    }
    printf("kiln %s: %s, %d tokens\n", kiln_version(), info.architecture, (int)info.n_vocab);
    kiln_model_free(model);
    return 0;
}
