/* The floor of the start-up benchmark: what any process that uses the
 * system's libfabric pays before it can do anything with it. Loading the
 * library runs the constructors of the libraries it links; the first
 * fi_getinfo runs the initialisation of every built-in provider. The
 * provider asked for is the first argument (default shm). */
#include <rdma/fabric.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
	struct fi_info *hints, *info = NULL;
	int ret;

	hints = fi_allocinfo();
	if (!hints)
		return 1;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->fabric_attr->prov_name = strdup(argc > 1 ? argv[1] : "shm");
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, &info);
	if (ret != 0) {
		fprintf(stderr, "floor: fi_getinfo(%s): %s\n", hints->fabric_attr->prov_name, fi_strerror(-ret));
		fi_freeinfo(hints);
		return 1;
	}
	printf("floor: %s\n", info->fabric_attr->prov_name);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
