// The kernel of the checked-in image fixtures (tests/fixtures/images/):
// small real images for the image validator's tests. See the README there.

// Increments every element below n.
extern "C" __global__ void add_one(int *data, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] += 1;
}
