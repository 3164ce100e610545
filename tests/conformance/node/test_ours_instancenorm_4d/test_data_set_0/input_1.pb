BscaleJ¼1@`
Š¿g‰¿