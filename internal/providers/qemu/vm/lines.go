package vm

// LastLines is the last n non-empty lines of the file at path, joined by
// " | ", or "" when it cannot be read. It reads only the file's end, so a
// caller can quote a guest's console log, however long, in a condition
// message.
func LastLines(path string, n int) string { return lastLines(path, n) }
