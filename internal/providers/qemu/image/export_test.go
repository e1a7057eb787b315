package image

// For the tests of package image_test, which use test/fixture (which
// imports this package).
var (
	ImportImages = importImages
	Closure      = closure
)
