// Package cloudinit interprets the cloud-init bootstrap data a Capstan local
// machine boots from.
//
// Cluster API bootstrap providers hand a machine its bootstrap data as a
// cloud-config document ("#cloud-config" YAML, usually preceded by
// "## template: jinja"). A cloud VM gives that document to cloud-init; a
// Capstan local machine is a set of processes in a directory of its own, so
// the node agent gives it to this package instead. The work is split in
// three so each part can be tested on its own:
//
//   - Parse reads the document. It understands the modules the kubeadm
//     bootstrap provider uses — bootcmd, write_files, users, ntp, runcmd —
//     and parses disk_setup, fs_setup and mounts so they can be reported.
//     Every problem is reported naming its field, for example
//     `write_files[2].permissions: "0x44" is not an octal mode`. Top-level
//     keys it does not know are recorded in Config.Ignored: they are
//     reported, never acted on.
//
//   - Plan is pure. It turns a Config into an ordered list of typed steps in
//     cloud-init's module order: bootcmd, write_files, the disk modules (as
//     Unsupported), users, ntp, deferred write_files, runcmd, the ignored
//     keys (as Unsupported), and finally MarkComplete. Every file path is
//     re-rooted under Options.Root, the machine's directory; a path that is
//     relative or contains ".." is refused. In "## template: jinja"
//     documents, {{ variable }} references in paths, plain file contents and
//     commands are expanded from Options.Hostname and Options.TemplateVars;
//     a variable without a value is an error, not an empty string.
//
//   - Apply performs the steps. Files are written atomically (temporary file
//     plus rename) with their modes, never through a symbolic link that
//     leads out of the root. Commands go to a Runner, implemented by the node
//     agent, which runs what it knows (kubeadm init / join among them) and
//     answers NotSupported(reason) for what a local machine cannot do; such
//     steps are reported as skipped with the reason, never silently
//     dropped. Users and NTP are only acted on when the Runner also
//     implements UserCreator or NTPConfigurer. Commands reach the Runner as
//     written, so the paths in them (/run/kubeadm/kubeadm.yaml) are paths
//     inside the machine: the Runner resolves them against the root it
//     planned with. Apply stops at the first
//     failure. Completed steps are kept in a journal under the root
//     (JournalPath), so applying the same plan again repeats no command and
//     no append and reports those steps as already done. Only when every
//     step succeeded or was skipped does Apply write the Cluster API
//     bootstrap success sentinel, SentinelPath, under the root.
//
// Permissions are octal strings ("0640", "640", "0o640"); an unquoted YAML
// number is taken as the mode YAML decoded (0640 is octal in YAML 1.1), as
// cloud-init does, so quote modes to be safe.
//
// Differences from cloud-init, deliberately: ownership (owner) is recorded
// but not applied, since a local machine runs unprivileged; an unknown
// write_files encoding is an error rather than a warning; content fetched
// from a URL (source) and YAML !!binary values are refused; runcmd stops at
// the first failing command, where cloud-init's script would go on; and
// bootcmd entries are journaled like everything else, so they run once per
// machine rather than on every boot.
package cloudinit
