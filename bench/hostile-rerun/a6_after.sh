#!/bin/bash
# Item 6 variant: nobody joins root's job's unique id after the job's ranks here ended;
# where does its hang trace go in the store?
. /tmp/neighbours-attacks/env.sh
D=/tmp/neighbours-a6; rm -rf $D; mkdir -p $D/theirs $D/home/.aws; chmod 755 $D; chown 65534:65534 $D/theirs
printf '[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n' > $D/home/.aws/credentials
cp /tmp/neighbours-attacks/nccl_ranks-main $D/nccl_ranks
PORT=39517
/tmp/neighbours-venv/bin/moto_server -H 127.0.0.1 -p $PORT > /dev/null 2>&1 & M=$!
for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$PORT/ && break; sleep 0.3; done
/tmp/neighbours-venv/bin/python -c "
import boto3
boto3.client('s3',endpoint_url='http://127.0.0.1:$PORT',aws_access_key_id='testing',aws_secret_access_key='testing',region_name='us-east-1').create_bucket(Bucket='rocsync-traces')" 
HOME=$D/home start_daemon $D $D/nccl_ranks --capture-on-stall 50ms --stall-window-after 300ms --hang-after 1s \
  --upload s3://rocsync-traces/fleet --upload-endpoint http://127.0.0.1:$PORT --node-name node-a
(cd $D && TMPDIR=$D $D/nccl_ranks 2 4 1 3 5000 1500 > $D/job.out)
HEX=$(grep -m1 '^uid ' $D/job.out | cut -d' ' -f2)
sleep 2
TMPDIR=$D/theirs $NOBODY $D/nccl_ranks rank 1 2 1 9 0 0 1000 0 $HEX > /dev/null & F=$!
for i in $(seq 300); do grep -q "hang: pid $F's" $D/daemon.log && break; sleep 0.1; done
sleep 1; kill $F; wait $F 2>/dev/null
sleep 8
/tmp/neighbours-venv/bin/python -c "
import boto3
s3=boto3.client('s3',endpoint_url='http://127.0.0.1:$PORT',aws_access_key_id='testing',aws_secret_access_key='testing',region_name='us-east-1')
for o in s3.list_objects_v2(Bucket='rocsync-traces').get('Contents',[]): print(o['Key'])"
echo "forger pid $F"; grep "claimed on this node" $D/daemon.log | cut -c1-200
stop_daemon; kill $M
