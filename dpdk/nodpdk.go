//go:build !dpdk

// Package dpdk is empty without the dpdk build tag: its tests then only
// check that they were not left out by mistake (nodpdk_test.go).
package dpdk
