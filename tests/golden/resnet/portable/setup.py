"""Builds the optional fused bias+ReLU kernel:  python setup.py install  (needs nvcc)."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="fused_bias_relu_cuda",
    version="0.1.0",
    ext_modules=[
        CUDAExtension(
            name="fused_bias_relu_cuda",
            sources=["csrc/fused_bias_relu.cpp", "csrc/fused_bias_relu.cu"],
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3", "--use_fast_math", "-gencode=arch=compute_80,code=sm_80"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
