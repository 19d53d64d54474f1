
batchedreq-1"
timeoutÜ"
priority"
binary_data_output*
xFP32*
idsINT64*
maskBOOL*
hFP162
y:H$+29@GNU\cjqx†”›¢©°·¾ÅÌÓÚáèïöı '.5<CJQX_fmt{‚‰—¥¬³ºÁÈÏÖİäëò:0$+29@GNU\cjqx†”›¢©°·¾ÅÌÓÚáèïöı '.5<CJ:	$+29:$+29@GN