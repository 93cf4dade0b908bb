// Python binding for the prebuilt extension (setup.py). The JIT path in resnet.py binds
// fused_bias_relu_cuda directly through load_inline(functions=...).
#include <torch/extension.h>

torch::Tensor fused_bias_relu_cuda(torch::Tensor x, torch::Tensor bias);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("fused_bias_relu_cuda", &fused_bias_relu_cuda, "out = relu(x + bias) (CUDA)");
}
