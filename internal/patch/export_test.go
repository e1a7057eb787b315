package patch

// GateChanged exposes gateChanged to the external tests.
var GateChanged = gateChanged
