module collmux

go 1.26.8
