// Command tiny is an empty program whose build information TestBinaryVersion reads.
package main

func main() {}
