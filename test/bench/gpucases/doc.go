// Package gpucases checks package gpu on the DDTBench-like application
// layouts of test/bench/internal/ddtcases: the plans' index arithmetic
// (gpu.Plan.Emulator) against ddt's interpreter, whole and in resumable
// windows; the OpenCL C kernels on the first OpenCL device (pocl here); and
// every PTX kernel through ptxas for sm_80 and sm_90. It has no code of its
// own; see its tests.
package gpucases
