// Package guest is Capstan's kubeadm inside a QEMU guest: what the
// guest image's /usr/local/bin/kubeadm shim runs (`capstan kubeadm init` and
// `join`), and the systemd service that runs the machine's components from
// then on (`capstan node serve --root /`).
//
// kubeadm init and join are the local provider's own (package agent's
// Node), performed on the guest's real root: the command sets the machine
// up with its components running in-process, stops them, installs and
// starts capstan-node.service, and returns once that service reports the
// same components running again — so a command that returned 0 left a node
// that also survives a reboot, and a failure is an exit status cloud-init
// logs. The service restarts, at every boot, what the machine became
// (/var/lib/capstan), as a local machine's restarted process does.
//
// docs/qemu-guest.md, section "Inside the guest", says what runs there.
package guest
