/*
 * fakenccl.c: a stand-in libnccl.so.2 with ncclGetVersion alone, NCCL
 * 2.19.3's number, so that the suite sees which NCCL `collmux topo` finds
 * (by the linker's search path, as the library loads it).
 */
int ncclGetVersion(int *version)
{
	*version = 21903; /* 2.19.3: major*10000 + minor*100 + patch */
	return 0;
}
