package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
)

// Format is the format of the bootstrap data a KubeadmConfig produces.
// +kubebuilder:validation:Enum=cloud-config;ignition
type Format string

const (
	// CloudConfig produces cloud-init cloud-config user data (the default).
	CloudConfig Format = "cloud-config"

	// Ignition produces an Ignition config, for Flatcar and similar systems.
	Ignition Format = "ignition"
)

// KubeadmConfigSpec is the desired bootstrap of one machine with kubeadm.
// A machine that runs "kubeadm init" uses clusterConfiguration and
// initConfiguration; one that runs "kubeadm join" uses joinConfiguration.
// The other fields shape the cloud-init or Ignition data around kubeadm.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!has(self.ignition) || (has(self.format) && self.format == 'ignition')",message="ignition can only be set when format is \"ignition\": set format: ignition, or remove ignition",fieldPath=".ignition"
// +kubebuilder:validation:XValidation:rule="!(has(self.format) && self.format == 'ignition') || !has(self.bootCommands)",message="bootCommands is not supported with format ignition: move the commands to preKubeadmCommands, or use format cloud-config",fieldPath=".bootCommands"
// +kubebuilder:validation:XValidation:rule="!(has(self.format) && self.format == 'ignition') || !has(self.files) || self.files.all(f, !has(f.encoding) || f.encoding == 'base64')",message="files[].encoding gzip and gzip+base64 are not supported with format ignition: use base64 or plain content, or format cloud-config",fieldPath=".files"
// +kubebuilder:validation:XValidation:rule="!(has(self.format) && self.format == 'ignition') || !has(self.users) || self.users.all(u, !has(u.inactive) || !u.inactive)",message="users[].inactive: true is not supported with format ignition: remove it, or use format cloud-config",fieldPath=".users"
// +kubebuilder:validation:XValidation:rule="!(has(self.format) && self.format == 'ignition') || !has(self.diskSetup) || !has(self.diskSetup.partitions) || self.diskSetup.partitions.all(p, !has(p.tableType) || p.tableType == 'gpt')",message="diskSetup.partitions[].tableType must be gpt with format ignition: set tableType: gpt, or use format cloud-config",fieldPath=".diskSetup.partitions"
// +kubebuilder:validation:XValidation:rule="!(has(self.format) && self.format == 'ignition') || !has(self.diskSetup) || !has(self.diskSetup.filesystems) || self.diskSetup.filesystems.all(f, !has(f.replaceFS) && !has(f.partition))",message="diskSetup.filesystems[].replaceFS and partition are not supported with format ignition: remove them, or use format cloud-config",fieldPath=".diskSetup.filesystems"
type KubeadmConfigSpec struct {
	// clusterConfiguration holds the cluster-wide kubeadm settings, used with
	// initConfiguration by "kubeadm init".
	// +optional
	ClusterConfiguration ClusterConfiguration `json:"clusterConfiguration,omitempty,omitzero"`

	// initConfiguration holds the settings that only "kubeadm init" uses.
	// +optional
	InitConfiguration InitConfiguration `json:"initConfiguration,omitempty,omitzero"`

	// joinConfiguration holds the settings of "kubeadm join".
	// +optional
	JoinConfiguration JoinConfiguration `json:"joinConfiguration,omitempty,omitzero"`

	// files are written on the machine before kubeadm runs. Each path may appear once.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=200
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, x.path == y.path))",message="files: each path may appear only once; merge the entries that share a path"
	Files []File `json:"files,omitempty"`

	// diskSetup partitions disks and creates file systems on them.
	// +optional
	DiskSetup DiskSetup `json:"diskSetup,omitempty,omitzero"`

	// mounts lists mount points to set up, each as the fields of an fstab line.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Mounts []MountPoints `json:"mounts,omitempty"`

	// bootCommands run very early at every boot (cloud-init bootcmd); wrap a
	// command in cloud-init-per to run it once. Not supported with format ignition.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=10240
	BootCommands []string `json:"bootCommands,omitempty"`

	// preKubeadmCommands run before kubeadm: first in cloud-init runcmd, or at
	// the start of /etc/kubeadm.sh with Ignition.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=10240
	PreKubeadmCommands []string `json:"preKubeadmCommands,omitempty"`

	// postKubeadmCommands run after kubeadm: last in cloud-init runcmd, or at
	// the end of /etc/kubeadm.sh with Ignition.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=10240
	PostKubeadmCommands []string `json:"postKubeadmCommands,omitempty"`

	// users are extra user accounts to create on the machine.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Users []User `json:"users,omitempty"`

	// ntp configures time synchronisation.
	// +optional
	NTP NTP `json:"ntp,omitempty,omitzero"`

	// format is the format of the bootstrap data: cloud-config (the default)
	// or ignition.
	// +optional
	Format Format `json:"format,omitempty"`

	// verbosity is kubeadm's log level; it replaces the --v flag of the
	// kubeadm commands.
	// +optional
	Verbosity *int32 `json:"verbosity,omitempty"`

	// ignition holds settings that apply only with format ignition.
	// +optional
	Ignition IgnitionSpec `json:"ignition,omitempty,omitzero"`
}

// IgnitionSpec holds settings that apply only with format ignition.
// +kubebuilder:validation:MinProperties=1
type IgnitionSpec struct {
	// containerLinuxConfig configures the Container Linux Config that is merged
	// into the generated Ignition config.
	// +optional
	ContainerLinuxConfig ContainerLinuxConfig `json:"containerLinuxConfig,omitempty,omitzero"`
}

// IsDefined tells whether any field of the IgnitionSpec is set.
func (s *IgnitionSpec) IsDefined() bool { return !isZero(*s) }

// ContainerLinuxConfig holds a Container Linux Config (CLC) to merge into the
// Ignition config Capstan generates.
// +kubebuilder:validation:MinProperties=1
type ContainerLinuxConfig struct {
	// additionalConfig is a Container Linux Config, in YAML, merged into the
	// generated Ignition config following Ignition's merge rules.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32768
	AdditionalConfig string `json:"additionalConfig,omitempty"`

	// strict treats warnings from parsing additionalConfig as errors.
	// +optional
	Strict *bool `json:"strict,omitempty"`
}

// IsDefined tells whether any field of the ContainerLinuxConfig is set.
func (c *ContainerLinuxConfig) IsDefined() bool { return !isZero(*c) }

// KubeadmConfigStatus is the observed state of a KubeadmConfig.
// +kubebuilder:validation:MinProperties=1
type KubeadmConfigStatus struct {
	// conditions are the latest observations of the KubeadmConfig, among them
	// Ready, DataSecretAvailable and CertificatesAvailable.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization reports the steps of the first provisioning of the
	// Machine that are part of the Cluster API contract.
	// +optional
	Initialization KubeadmConfigInitializationStatus `json:"initialization,omitempty,omitzero"`

	// dataSecretName is the name of the Secret that holds the bootstrap data.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DataSecretName string `json:"dataSecretName,omitempty"`

	// observedGeneration is the metadata.generation the controller last acted on.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// deprecated holds status fields of older API versions; Capstan does
	// not write them.
	// +optional
	Deprecated *KubeadmConfigDeprecatedStatus `json:"deprecated,omitempty"`
}

// KubeadmConfigDeprecatedStatus holds a KubeadmConfig's status fields from
// older API versions, kept for objects converted from them.
type KubeadmConfigDeprecatedStatus struct {
	// v1beta1 holds the fields v1beta1 had.
	// +optional
	V1Beta1 *KubeadmConfigV1Beta1DeprecatedStatus `json:"v1beta1,omitempty"`
}

// KubeadmConfigV1Beta1DeprecatedStatus is a KubeadmConfig's v1beta1 status
// remainder.
type KubeadmConfigV1Beta1DeprecatedStatus struct {
	clusterv1.V1Beta1ConditionsStatus `json:",inline"`

	// failureReason was a terse word for a fatal problem.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureReason string `json:"failureReason,omitempty"`

	// failureMessage was the explanation of a fatal problem.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=10240
	FailureMessage string `json:"failureMessage,omitempty"`
}

// KubeadmConfigInitializationStatus reports the first provisioning of the
// Machine, as the Cluster API contract defines it.
// +kubebuilder:validation:MinProperties=1
type KubeadmConfigInitializationStatus struct {
	// dataSecretCreated is true once the bootstrap data Secret exists. The
	// Machine controller waits for it before provisioning infrastructure.
	// +optional
	DataSecretCreated *bool `json:"dataSecretCreated,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=kubeadmconfigs,scope=Namespaced,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta2","clusterctl.cluster.x-k8s.io=","cluster.x-k8s.io/provider=bootstrap-kubeadm"}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this config belongs to"
// +kubebuilder:printcolumn:name="Paused",type="string",JSONPath=`.status.conditions[?(@.type=="Paused")].status`,description="Whether reconciliation is paused",priority=10
// +kubebuilder:printcolumn:name="Data secret created",type="string",JSONPath=`.status.initialization.dataSecretCreated`,description="Whether the bootstrap data Secret exists"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the KubeadmConfig was created"

// KubeadmConfig bootstraps one Machine with kubeadm: its controller turns the
// spec into cloud-init or Ignition data, stored in the Secret named by
// status.dataSecretName.
type KubeadmConfig struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired bootstrap of the Machine.
	// +optional
	Spec KubeadmConfigSpec `json:"spec,omitempty,omitzero"`

	// status is what the controller last observed.
	// +optional
	Status KubeadmConfigStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the object's conditions.
func (c *KubeadmConfig) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the object's conditions.
func (c *KubeadmConfig) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// KubeadmConfigList is a list of KubeadmConfigs.
type KubeadmConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's standard metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the KubeadmConfigs.
	Items []KubeadmConfig `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KubeadmConfig{}, &KubeadmConfigList{})
}

// Encoding is how a file's content is encoded in the spec.
// +kubebuilder:validation:Enum=base64;gzip;gzip+base64
type Encoding string

const (
	// Base64 content is base64-encoded.
	Base64 Encoding = "base64"
	// Gzip content is gzip-compressed.
	Gzip Encoding = "gzip"
	// GzipBase64 content is gzip-compressed, then base64-encoded.
	GzipBase64 Encoding = "gzip+base64"
)

// File is a file to write on the machine before kubeadm runs (cloud-init write_files).
// +kubebuilder:validation:XValidation:rule="!(has(self.content) && has(self.contentFrom))",message="a file takes its content from content or from contentFrom, not both: remove one of them"
type File struct {
	// path is the absolute path of the file on the machine.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Path string `json:"path,omitempty"`

	// owner is the owner of the file as "user:group", for example "root:root".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Owner string `json:"owner,omitempty"`

	// permissions is the file mode in octal, for example "0640".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16
	Permissions string `json:"permissions,omitempty"`

	// encoding is how content is encoded; plain text when it is not set.
	// +optional
	Encoding Encoding `json:"encoding,omitempty"`

	// append adds the content to the end of the file if it exists, instead of
	// replacing it.
	// +optional
	Append *bool `json:"append,omitempty"`

	// content is the content of the file, inline. Not allowed together with contentFrom.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=10240
	Content string `json:"content,omitempty"`

	// contentFrom takes the content of the file from a Secret. Not allowed
	// together with content.
	// +optional
	ContentFrom FileSource `json:"contentFrom,omitempty,omitzero"`

	// contentFormat says how the content, inline or from contentFrom, is
	// read before it is written: Raw (the default when unset) writes it as
	// it is; Template renders it as a Go text/template first, in which
	// .controlPlane.version is the control plane's Kubernetes version.
	// +optional
	ContentFormat FileContentFormat `json:"contentFormat,omitempty"`
}

// FileContentFormat is how a file's content is read before it is written.
// +kubebuilder:validation:Enum=Raw;Template
type FileContentFormat string

// The content formats of a file.
const (
	// FileContentFormatRaw writes the content as it is.
	FileContentFormatRaw FileContentFormat = "Raw"
	// FileContentFormatTemplate renders the content as a Go text/template.
	FileContentFormatTemplate FileContentFormat = "Template"
)

// FileSource is where a file's content comes from. Only a Secret is supported.
type FileSource struct {
	// secret is the Secret key that holds the content.
	// +required
	Secret SecretFileSource `json:"secret,omitempty,omitzero"`
}

// IsDefined tells whether any field of the FileSource is set.
func (s *FileSource) IsDefined() bool { return !isZero(*s) }

// SecretFileSource is one key of a Secret in the namespace of the KubeadmConfig.
type SecretFileSource struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// key in the Secret's data whose value is used.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Key string `json:"key,omitempty"`
}

// PasswdSource is where a user's password hash comes from. Only a Secret is supported.
type PasswdSource struct {
	// secret is the Secret key that holds the password hash.
	// +required
	Secret SecretPasswdSource `json:"secret,omitempty,omitzero"`
}

// IsDefined tells whether any field of the PasswdSource is set.
func (s *PasswdSource) IsDefined() bool { return !isZero(*s) }

// SecretPasswdSource is one key of a Secret in the namespace of the KubeadmConfig.
type SecretPasswdSource struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// key in the Secret's data whose value is used.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Key string `json:"key,omitempty"`
}

// User is a user account to create on the machine (cloud-init users).
// +kubebuilder:validation:XValidation:rule="!(has(self.passwd) && has(self.passwdFrom))",message="a user takes its password from passwd or from passwdFrom, not both: remove one of them"
type User struct {
	// name is the user name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`

	// gecos is the user's comment (GECOS) field.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Gecos string `json:"gecos,omitempty"`

	// groups are the user's extra groups, comma separated.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Groups string `json:"groups,omitempty"`

	// homeDir is the user's home directory.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	HomeDir string `json:"homeDir,omitempty"`

	// inactive creates the account disabled when true. Not supported with format ignition.
	// +optional
	Inactive *bool `json:"inactive,omitempty"`

	// shell is the user's login shell.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Shell string `json:"shell,omitempty"`

	// passwd is the user's password hash. Not allowed together with passwdFrom.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Passwd string `json:"passwd,omitempty"`

	// passwdFrom takes the user's password hash from a Secret. Not allowed
	// together with passwd.
	// +optional
	PasswdFrom PasswdSource `json:"passwdFrom,omitempty,omitzero"`

	// primaryGroup is the user's primary group.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	PrimaryGroup string `json:"primaryGroup,omitempty"`

	// lockPassword turns password login off for the user when true.
	// +optional
	LockPassword *bool `json:"lockPassword,omitempty"`

	// sudo is the user's sudoers rule, for example "ALL=(ALL) NOPASSWD:ALL".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Sudo string `json:"sudo,omitempty"`

	// sshAuthorizedKeys are public keys allowed to log in as the user over SSH.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=2048
	SSHAuthorizedKeys []string `json:"sshAuthorizedKeys,omitempty"`
}

// NTP configures time synchronisation (cloud-init ntp).
// +kubebuilder:validation:MinProperties=1
type NTP struct {
	// servers are the NTP servers to use.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	Servers []string `json:"servers,omitempty"`

	// enabled turns the NTP client on or off.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// IsDefined tells whether any field of the NTP is set.
func (n *NTP) IsDefined() bool { return !isZero(*n) }

// DiskSetup partitions disks and creates file systems (cloud-init disk_setup
// and fs_setup).
// +kubebuilder:validation:MinProperties=1
type DiskSetup struct {
	// partitions are the partition tables to create.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Partitions []Partition `json:"partitions,omitempty"`

	// filesystems are the file systems to create.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Filesystems []Filesystem `json:"filesystems,omitempty"`
}

// IsDefined tells whether any field of the DiskSetup is set.
func (d *DiskSetup) IsDefined() bool { return !isZero(*d) }

// Partition says how to partition one device.
// +kubebuilder:validation:XValidation:rule="[has(self.layout), has(self.diskLayout)].filter(x, x).size() == 1",message="a partition needs exactly one of layout (one partition for the whole device, or none) and diskLayout (a list of partitions by percentage): set one and remove the other"
type Partition struct {
	// device is the device to partition, for example /dev/sdb.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Device string `json:"device,omitempty"`

	// layout, when true, makes one partition that spans the whole device; when
	// false the device is left unpartitioned (or as it is). Set layout or
	// diskLayout, not both.
	// +optional
	Layout *bool `json:"layout,omitempty"`

	// overwrite skips the safety checks and partitions the device even if it
	// already holds a partition table or file system. Use with care; false by default.
	// +optional
	Overwrite *bool `json:"overwrite,omitempty"`

	// tableType is the partition table type: mbr (an MS-DOS table, the default)
	// or gpt. Only gpt is supported with format ignition.
	// +optional
	// +kubebuilder:validation:Enum=mbr;gpt
	TableType string `json:"tableType,omitempty"`

	// diskLayout lists the partitions to make, in order, each as a
	// percentage of the device; the percentages add up to 100 at most. Set
	// layout or diskLayout, not both.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.map(p, p.percentage).sum() <= 100",message="the percentages of diskLayout add up to more than 100: make them smaller"
	DiskLayout []PartitionSpec `json:"diskLayout,omitempty"`
}

// PartitionSpec is one partition of a disk layout.
type PartitionSpec struct {
	// percentage of the device the partition takes, 1 to 100.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Percentage int32 `json:"percentage,omitempty"`

	// partitionType is the partition's type: Linux, LinuxSwap, LinuxRAID,
	// LVM, Fat32, NTFS, LinuxExtended, or a GPT partition type GUID, passed
	// as it is.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=36
	// +kubebuilder:validation:XValidation:rule="self.matches('^(Linux|LinuxSwap|LinuxRAID|LVM|Fat32|NTFS|LinuxExtended|[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12})$')",message="partitionType must be one of Linux, LinuxSwap, LinuxRAID, LVM, Fat32, NTFS, LinuxExtended or a GPT partition type GUID such as 0FC63DAF-8483-4772-8E79-3D69D8477DE4"
	PartitionType string `json:"partitionType,omitempty"`
}

// The named partition types of a disk layout.
const (
	PartitionTypeLinux         = "Linux"
	PartitionTypeLinuxSwap     = "LinuxSwap"
	PartitionTypeLinuxRAID     = "LinuxRAID"
	PartitionTypeLVM           = "LVM"
	PartitionTypeFat32         = "Fat32"
	PartitionTypeNTFS          = "NTFS"
	PartitionTypeLinuxExtended = "LinuxExtended"
)

// Filesystem is a file system to create.
type Filesystem struct {
	// device is the device to create the file system on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Device string `json:"device,omitempty"`

	// filesystem is the file system type, for example ext4 or xfs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Filesystem string `json:"filesystem,omitempty"`

	// label is the file system label; "None" means no label.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Label string `json:"label,omitempty"`

	// partition is the partition to use: "auto|any", "auto", "any", "none", or
	// a partition number. Not supported with format ignition.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Partition string `json:"partition,omitempty"`

	// overwrite destroys any existing file system on the device when true. Use with care.
	// +optional
	Overwrite *bool `json:"overwrite,omitempty"`

	// replaceFS tells cloud-init to replace a file system of the given type;
	// used on Microsoft Azure. Without a label it needs partition "any". Not
	// supported with format ignition.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ReplaceFS string `json:"replaceFS,omitempty"`

	// extraOpts are extra arguments for the command that creates the file system.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	ExtraOpts []string `json:"extraOpts,omitempty"`
}

// MountPoints is one mount, as the fields of an fstab line: device, mount
// point, and optionally type, options, dump and pass.
// +kubebuilder:validation:MinItems=1
// +kubebuilder:validation:MaxItems=100
// +kubebuilder:validation:items:MinLength=1
// +kubebuilder:validation:items:MaxLength=512
type MountPoints []string
