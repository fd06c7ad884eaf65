// The kernel of the image-choice fixtures: one store, so each image is small.
extern "C" __global__ void one(int *out) { out[0] = __CUDA_ARCH__; }
