package qemu

// loopbackForwards is the VM's vendor-data: a cloud-config that makes the
// guest's 127.0.0.1:PORT reach the host's 127.0.0.1:PORT for each port, so
// that every machine reaches the control-plane endpoint (the load balancer
// on the host's loopback) at the address the kubeconfigs name.
//
// INTEGRATION: q20-vm provides vm.LoopbackForwards(ports []int) []byte; once
// it is merged this body becomes `return vm.LoopbackForwards(ports)`. Until
// then guests get no vendor-data and cannot reach the endpoint.
func loopbackForwards(ports []int) []byte {
	_ = ports
	return nil
}
