module github.com/weir-gateway/weir

go 1.26

require golang.org/x/sync v0.25.0 // indirect
