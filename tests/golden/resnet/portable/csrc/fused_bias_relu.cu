// Fused bias-add + ReLU for the classifier head: out = max(x + bias, 0), bias broadcast over rows.
// One grid-stride loop; math in fp32 so fp16/bf16 inputs do not lose the bias.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

template <typename scalar_t>
__global__ void bias_relu_kernel(const scalar_t* __restrict__ x,
                                 const scalar_t* __restrict__ bias,
                                 scalar_t* __restrict__ out,
                                 int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)blockDim.x * gridDim.x) {
    const float v = static_cast<float>(x[i]) + static_cast<float>(bias[i % cols]);
    out[i] = static_cast<scalar_t>(v > 0.f ? v : 0.f);
  }
}

torch::Tensor fused_bias_relu_cuda(torch::Tensor x, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "fused_bias_relu: inputs must be CUDA tensors");
  TORCH_CHECK(x.size(-1) == bias.numel(), "fused_bias_relu: bias must match the last dim of x");
  const at::cuda::OptionalCUDAGuard guard(device_of(x));
  x = x.contiguous();
  bias = bias.to(x.scalar_type()).contiguous();
  auto out = torch::empty_like(x);
  const int64_t n = x.numel();
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(),
                                  "fused_bias_relu", [&] {
    bias_relu_kernel<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n, bias.numel());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
