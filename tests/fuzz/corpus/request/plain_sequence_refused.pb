
plain"
sequence_id(*
srINT32*
imgUINT8*
xINT16::
$+29@:$+2